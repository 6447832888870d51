"""Runs the Slurm clients: fixed argument lists, no shell, a timeout per command (the child is killed)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from exporter.scheduler.errors import CommandError

log = logging.getLogger(__name__)

PROGRAMS = ("sinfo", "squeue", "scontrol")
MAX_ERROR_CHARS = 300


def resolve_program(name: str, bin_dir: Path | None) -> str:
    """Absolute path of Slurm client `name`, from `bin_dir` or else PATH; raise CommandError if absent."""
    if bin_dir is not None:
        candidate = bin_dir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.resolve())
        raise CommandError(f"{candidate} is not an executable file")
    found = shutil.which(name)
    if found is None:
        raise CommandError(f"{name} is not on PATH")
    return found


@dataclass(frozen=True)
class SlurmCommands:
    """The three read-only commands a poll runs, with the environment and timeout they run under."""

    sinfo: str
    squeue: str
    scontrol: str
    timeout_seconds: float
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(cls, bin_dir: Path | None, slurm_conf: Path | None, timeout_seconds: float) -> SlurmCommands:
        """Find the programs and build their environment (SLURM_CONF when a config file is given)."""
        env = dict(os.environ)
        if slurm_conf is not None:
            env["SLURM_CONF"] = str(slurm_conf)
        paths = [resolve_program(name, bin_dir) for name in PROGRAMS]
        return cls(paths[0], paths[1], paths[2], timeout_seconds, env)

    def nodes_json(self) -> str:
        """`sinfo --json`: every node with its state, GRES and partitions."""
        return self.run(self.sinfo, "--json")

    def jobs_json(self) -> str:
        """`squeue --all --json`: every job record, hidden partitions included."""
        return self.run(self.squeue, "--all", "--json")

    def partitions_text(self) -> str:
        """`scontrol --all --oneliner show partitions`: every partition, empty and hidden ones too."""
        return self.run(self.scontrol, "--all", "--oneliner", "show", "partitions")

    def run(self, program: str, *args: str) -> str:
        """Run one command; its stdout, or CommandError (could not start, non-zero exit, timeout)."""
        argv = [program, *args]
        name = Path(program).name
        start = time.monotonic()
        try:
            result = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout_seconds,
                env=dict(self.env) or None,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CommandError(f"{name}: no answer within {self.timeout_seconds:g} s (killed)") from None
        except OSError as exc:
            raise CommandError(f"{name}: cannot run: {exc.strerror or exc}") from None
        log.debug("%s took %.3f s, exit %d", " ".join(argv), time.monotonic() - start, result.returncode)
        if result.returncode != 0:
            detail = (result.stderr.strip() or result.stdout.strip())[:MAX_ERROR_CHARS]
            raise CommandError(f"{name} exited {result.returncode}: {detail}")
        return result.stdout
