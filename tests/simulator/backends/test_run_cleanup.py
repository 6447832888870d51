"""ibsim/OpenSM and the local Slurm stop every process they started: after a start that fails part-way,
and when the body of their `with` raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.backends.errors import IbsimError, SlurmError
from simulator.backends.ibsim_fabric import FatTree
from simulator.backends.ibsim_run import Ibsim, missing_programs
from simulator.backends.processes import is_gone
from simulator.backends.slurm_run import Slurm, unavailable

pytestmark = pytest.mark.integration
NET = FatTree(leaves=1, spines=1, hcas_per_leaf=2, ports=4).render()
needs_ibsim = pytest.mark.skipif(bool(missing_programs()), reason=f"not installed: {missing_programs()}")
SLURM = unavailable()
needs_slurm = pytest.mark.skipif(SLURM is not None, reason=SLURM or "")


def _names(started: list[tuple[str, int]]) -> list[str]:
    return [name for name, _ in started]


@needs_ibsim
@pytest.mark.parametrize(
    ("binary", "started"), [("/nonexistent/opensm", ["ibsim"]), ("/bin/false", ["ibsim", "false"])]
)
def test_opensm_failing_to_start_stops_ibsim(tmp_path: Path, binary: str, started: list[str]) -> None:
    fabric = Ibsim(tmp_path, NET)
    with pytest.raises(IbsimError), fabric:
        fabric.start_opensm(binary=binary, timeout=10)
    assert _names(fabric.processes.started) == started
    assert fabric.processes.running() == []
    assert all(is_gone(pid) for pid in fabric.processes.pids)


@needs_ibsim
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_error_in_the_body_stops_opensm_and_ibsim(tmp_path: Path, error: type[BaseException]) -> None:
    fabric = Ibsim(tmp_path, NET)
    with pytest.raises(error), fabric:
        fabric.start_opensm()
        assert len(fabric.processes.running()) == 2
        raise error("after start")
    assert _names(fabric.processes.started) == ["ibsim", "opensm"]
    assert fabric.processes.running() == []


@needs_ibsim
def test_ibsim_failing_to_start_leaves_nothing(tmp_path: Path) -> None:
    fabric = Ibsim(tmp_path, "this is not a net file\n")
    with pytest.raises(IbsimError):
        fabric.start(timeout=5)
    assert fabric.processes.running() == []


@needs_slurm
@pytest.mark.parametrize("failing", ["slurmctld", "slurmd"])
def test_a_slurm_daemon_failing_to_start_stops_the_others(tmp_path: Path, failing: str) -> None:
    slurm = Slurm(tmp_path, ["node1", "node2"], binaries={failing: "/bin/false"})
    with pytest.raises(SlurmError, match=f"{failing}.* exited"):
        slurm.start(timeout=30)
    names = _names(slurm.processes.started)
    assert names == (["slurmctld"] if failing == "slurmctld" else ["slurmctld", "slurmd", "slurmd"])
    assert slurm.processes.running() == []
    assert not slurm.controller_up()


@needs_slurm
def test_an_error_in_the_body_stops_every_slurm_daemon(tmp_path: Path) -> None:
    slurm = Slurm(tmp_path, ["node1", "node2"])
    with pytest.raises(RuntimeError), slurm:
        assert slurm.node_states() == {"node1": "idle", "node2": "idle"}
        raise RuntimeError("after start")
    assert _names(slurm.processes.started) == ["slurmctld", "slurmd", "slurmd"]
    assert slurm.processes.running() == []
