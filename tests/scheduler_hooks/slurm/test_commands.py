"""The command runner: configured bin dir, SLURM_CONF, no shell, refused arguments, timeouts, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_hooks.errors import CommandFailedError
from scheduler_hooks.slurm.commands import SlurmCommands
from scheduler_hooks.slurm.config import SlurmConfig


def _program(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _commands(tmp_path: Path, timeout: float = 5.0) -> SlurmCommands:
    return SlurmCommands(
        SlurmConfig(tmp_path / "slurm.conf", bin_dir=tmp_path, command_timeout_seconds=timeout)
    )


def test_runs_from_bin_dir_with_slurm_conf_and_arguments_kept_whole(tmp_path: Path) -> None:
    _program(tmp_path, "scontrol", 'printf "%s|" "$SLURM_CONF" "$@"')
    out = _commands(tmp_path).run("scontrol", "update", "Reason=ibpool move x; rm -rf /", "$(id)")
    assert out == f"{tmp_path / 'slurm.conf'}|update|Reason=ibpool move x; rm -rf /|$(id)|"


def test_non_zero_exit_names_the_command_and_its_error(tmp_path: Path) -> None:
    _program(tmp_path, "sinfo", "echo 'sinfo: error: Invalid node name' >&2; exit 1")
    with pytest.raises(CommandFailedError, match=r"sinfo -h: exit 1: sinfo: error: Invalid node name"):
        _commands(tmp_path).run("sinfo", "-h")


def test_a_hung_command_is_killed(tmp_path: Path) -> None:
    _program(tmp_path, "squeue", "exec sleep 30")
    with pytest.raises(CommandFailedError, match=r"no answer within 0\.2 s"):
        _commands(tmp_path, timeout=0.2).run("squeue")


def test_missing_program_and_bad_arguments_are_refused(tmp_path: Path) -> None:
    commands = _commands(tmp_path)
    with pytest.raises(CommandFailedError, match="not an executable file"):
        commands.run("scontrol", "ping")
    _program(tmp_path, "scontrol", "exit 0")
    with pytest.raises(CommandFailedError, match="refused argument"):
        commands.run("scontrol", "update", "Reason=a\nb")
    with pytest.raises(CommandFailedError, match="not a Slurm client"):
        commands.run("rm", "-rf")  # type: ignore[arg-type]
