"""Names passed to scontrol are checked as whole strings: a trailing newline is not a valid name.

The runner here records calls (nothing may run); tests/scheduler_hooks/slurm/test_integration.py drives a
real Slurm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_hooks.errors import ChangeRejectedError, CommandFailedError
from scheduler_hooks.slurm.adapter import SlurmAdapter
from scheduler_hooks.slurm.commands import Program
from scheduler_hooks.slurm.config import SlurmConfig
from scheduler_hooks.slurm.live import SlurmLive


class Recorder:
    """A runner that records what it was asked to run and answers nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def run(self, program: Program, *args: str) -> str:
        self.calls.append((program, *args))
        return ""


@pytest.mark.parametrize("bad", ["a1\n", "a1\r", "a1\nPartitionName=x", "\na1", "a1 ", ""])
def test_node_names_with_line_breaks_are_refused(bad: str) -> None:
    runner = Recorder()
    live = SlurmLive(runner)
    with pytest.raises(CommandFailedError, match="refused to pass node names"):
        live.set_partition("gpu", ["a0", bad])
    with pytest.raises(CommandFailedError, match="refused to pass node names"):
        live.drain([bad], "ibpool move")
    with pytest.raises(CommandFailedError, match="refused to pass node names"):
        live.resume([bad])
    assert runner.calls == []


def test_partition_names_and_reasons_are_whole_strings() -> None:
    runner = Recorder()
    live = SlurmLive(runner)
    with pytest.raises(CommandFailedError, match="partition name"):
        live.set_partition("gpu\n", ["a1"])
    with pytest.raises(CommandFailedError, match="reason"):
        live.drain(["a1"], "ibpool move\n")
    live.set_partition("gpu", ["a1", "a2"])
    assert runner.calls == [("scontrol", "update", "PartitionName=gpu", "Nodes=a1,a2")]


def test_a_proposal_id_with_a_newline_is_refused(tmp_path: Path) -> None:
    runner = Recorder()
    adapter = SlurmAdapter(SlurmConfig(slurm_conf=tmp_path / "slurm.conf"), runner)
    with pytest.raises(ChangeRejectedError, match="letters, digits"):
        adapter.apply([], proposal="abc\n")
    assert runner.calls == []
