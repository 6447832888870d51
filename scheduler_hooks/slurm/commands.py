"""Runs the Slurm clients: a fixed set of programs, checked arguments, and the shared runner
(foundation.commands: no shell, a timeout on each, its process group killed)."""

from __future__ import annotations

import os
from typing import Literal, Protocol

from foundation.commands import CommandRunner, ProgramNotFoundError, find_program
from scheduler_hooks.errors import CommandFailedError
from scheduler_hooks.slurm.config import SlurmConfig

Program = Literal["scontrol", "sinfo", "squeue"]
PROGRAMS: tuple[Program, ...] = ("scontrol", "sinfo", "squeue")
MAX_ARG_CHARS = 65536


class Runner(Protocol):
    """What the adapter needs to talk to Slurm: run one client program, get its stdout."""

    def run(self, program: Program, *args: str) -> str:
        """Stdout of `program args`; CommandFailedError when it cannot run, times out or exits non-zero."""
        ...


class SlurmCommands:
    """Runs scontrol, sinfo and squeue from the configured bin dir (or PATH) with SLURM_CONF set."""

    def __init__(self, config: SlurmConfig) -> None:
        self._bin_dir = config.bin_dir
        env = {**os.environ, "SLURM_CONF": str(config.slurm_conf)}
        # cwd /: never depend on the caller's working directory (it may have been removed)
        self._runner = CommandRunner(config.command_timeout_seconds, cwd="/", env=env)

    def program_path(self, program: Program) -> str:
        """The executable run for `program`; CommandFailedError when it is not there."""
        if program not in PROGRAMS:
            raise CommandFailedError(f"{program!r} is not a Slurm client this adapter runs")
        try:
            return find_program(program, self._bin_dir)
        except ProgramNotFoundError as exc:
            raise CommandFailedError(str(exc)) from None

    def run(self, program: Program, *args: str) -> str:
        """Run one command (no shell); its stdout, or CommandFailedError naming the command and its error."""
        for arg in args:
            if not arg.isprintable() or len(arg) > MAX_ARG_CHARS:
                raise CommandFailedError(
                    f"{program}: refused argument {arg[:60]!r} (control characters or too long)"
                )
        result = self._runner.run([self.program_path(program), *args])
        if not result.ok:
            raise CommandFailedError(result.describe(with_args=True))
        return result.stdout
