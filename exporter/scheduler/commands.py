"""Runs the Slurm clients through the shared runner (foundation.commands): fixed argument lists, no
shell, a timeout per command (its process group is killed); a failure is a CommandError."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from exporter.scheduler.errors import CommandError
from foundation.commands import ProgramNotFoundError, find_program, run_command

PROGRAMS = ("sinfo", "squeue", "scontrol")


def resolve_program(name: str, bin_dir: Path | None) -> str:
    """Path of Slurm client `name`, in `bin_dir` or else installed; CommandError when it is not there."""
    try:
        return find_program(name, bin_dir)
    except ProgramNotFoundError as exc:
        raise CommandError(str(exc)) from None


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

    def config_text(self) -> str:
        """`scontrol show config` (the cluster's name, for one)."""
        return self.run(self.scontrol, "show", "config")

    def run(self, program: str, *args: str) -> str:
        """Run one command; its stdout, or CommandError (could not start, non-zero exit, timeout)."""
        result = run_command([program, *args], self.timeout_seconds, env=dict(self.env) or None)
        if not result.ok:
            raise CommandError(result.describe())
        return result.stdout
