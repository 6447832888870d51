"""Runs the Slurm clients: a fixed set of programs, checked arguments, no shell, a timeout on each."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Literal, Protocol

from scheduler_hooks.errors import CommandFailedError
from scheduler_hooks.slurm.config import SlurmConfig

log = logging.getLogger(__name__)

Program = Literal["scontrol", "sinfo", "squeue"]
PROGRAMS: tuple[Program, ...] = ("scontrol", "sinfo", "squeue")
MAX_ARG_CHARS = 65536
MAX_ERROR_CHARS = 400


class Runner(Protocol):
    """What the adapter needs to talk to Slurm: run one client program, get its stdout."""

    def run(self, program: Program, *args: str) -> str:
        """Stdout of `program args`; CommandFailedError when it cannot run, times out or exits non-zero."""
        ...


class SlurmCommands:
    """Runs scontrol, sinfo and squeue from the configured bin dir (or PATH) with SLURM_CONF set."""

    def __init__(self, config: SlurmConfig) -> None:
        self._bin_dir = config.bin_dir
        self._timeout = config.command_timeout_seconds
        self._env = {**os.environ, "SLURM_CONF": str(config.slurm_conf)}

    def program_path(self, program: Program) -> str:
        """The executable run for `program`; CommandFailedError when it is not there."""
        if program not in PROGRAMS:
            raise CommandFailedError(f"{program!r} is not a Slurm client this adapter runs")
        if self._bin_dir is not None:
            candidate = self._bin_dir / program
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
            raise CommandFailedError(f"{candidate} is not an executable file")
        found = shutil.which(program)
        if found is None:
            raise CommandFailedError(f"{program} is not on PATH")
        return found

    def run(self, program: Program, *args: str) -> str:
        """Run one command (no shell); its stdout, or CommandFailedError naming the command and its error."""
        for arg in args:
            if not arg.isprintable() or len(arg) > MAX_ARG_CHARS:
                raise CommandFailedError(
                    f"{program}: refused argument {arg[:60]!r} (control characters or too long)"
                )
        argv = [self.program_path(program), *args]
        shown = " ".join([program, *args])
        start = time.monotonic()
        try:
            result = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self._timeout,
                env=self._env,
                stdin=subprocess.DEVNULL,
                cwd="/",  # never depend on the caller's working directory (it may have been removed)
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CommandFailedError(f"{shown}: no answer within {self._timeout:g} s (killed)") from None
        except OSError as exc:
            raise CommandFailedError(f"{shown}: cannot run {Path(argv[0])}: {exc.strerror or exc}") from None
        log.debug("%s: exit %d in %.3f s", shown, result.returncode, time.monotonic() - start)
        if result.returncode != 0:
            detail = (result.stderr.strip() or result.stdout.strip())[:MAX_ERROR_CHARS]
            raise CommandFailedError(f"{shown}: exit {result.returncode}: {detail}")
        return result.stdout
