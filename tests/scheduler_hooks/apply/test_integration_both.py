"""A move_nodes proposal that changes both sides: Slurm partitions and OpenSM partition membership.

ibsim + OpenSM (node1-6) and Slurm (node1-6) with the same two pools; node3 moves from training to
inference. When OpenSM cannot take the change (stopped: the re-read never happens, verification fails),
its files are restored and the Slurm side, already moved, is moved back.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason
from tests.scheduler_hooks.apply.flow import Flow, sinfo
from tests.scheduler_hooks.opensm.lab import FILES, Lab, missing

SKIP = slurm_skip_reason() or (f"not installed: {', '.join(missing())}" if missing() else None)
pytestmark = [pytest.mark.integration, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]

ORIGINAL = {"training": ["node1", "node2", "node3"], "inference": ["node4", "node5", "node6"]}
MOVED = {"training": ["node1", "node2"], "inference": ["node3", "node4", "node5", "node6"]}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    running = Lab(tmp_path_factory.mktemp("both-lab")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with SlurmCluster(
        tmp_path_factory.mktemp("both-slurm"), nodes=6, partitions=ORIGINAL, cpus_per_node=2
    ) as c:
        yield c


@pytest.fixture
def flow(
    lab: Lab,
    cluster: SlurmCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Flow]:
    lab.reset(tmp_path / "reset-state")
    opensm = lab.config_mapping(tmp_path / "state" / "opensm", timeout=2)
    slurm = {
        "slurm_conf": str(cluster.conf_path),
        "poll_interval_seconds": 0.2,
        "command_timeout_seconds": 20,
    }
    config = tmp_path / "apply.yaml"
    config.write_text(
        yaml.safe_dump({"state_dir": str(tmp_path / "state"), "opensm": opensm, "slurm": slurm})
    )
    monkeypatch.setenv("IBPOOL_DB", str(tmp_path / "ibpool.db"))
    yield Flow(tmp_path, capsys, config)
    for name, nodes in ORIGINAL.items():
        cluster.scontrol("update", f"PartitionName={name}", f"Nodes={','.join(nodes)}")
    cluster.wait_idle(timeout=20)


def members(lab: Lab, nodes: list[str]) -> str:
    """The proposal form of an OpenSM partition: port GUIDs, sorted."""
    return ",".join(sorted(lab.guids[n] for n in nodes))


def changes(lab: Lab) -> list[tuple[str, str, str]]:
    """Slurm first (drain and wait), then the partition keys."""
    out = []
    for pool in ("training", "inference"):
        out.append((f"slurm.partition.{pool}.nodes", ",".join(ORIGINAL[pool]), ",".join(MOVED[pool])))
    for pool in ("training", "inference"):
        before, after = members(lab, ORIGINAL[pool]), members(lab, MOVED[pool])
        out.append((f"opensm.partition.{pool}.members", before, after))
    return out


def pkeys(lab: Lab, node: str) -> list[str]:
    return lab.smp("smpquery", "pkeys", str(lab.fabric.lid(node)), "1").split()


def test_both_sides_move_together(lab: Lab, cluster: SlurmCluster, flow: Flow) -> None:
    pid = flow.submit_and_approve(flow.proposal_file("move_nodes", changes(lab)))
    code, out, err = flow.apply(pid, "--yes")
    assert code == 0, err
    assert out.startswith(f"{pid}  applied: applied and verified (slurm applied, opensm applied)")
    assert sinfo(cluster) == MOVED
    keys = pkeys(lab, "node3")
    assert "0x8003" in keys and "0x8002" not in keys
    assert flow.apply(pid, "--yes")[0] == 0


def test_opensm_failing_moves_the_slurm_side_back(lab: Lab, cluster: SlurmCluster, flow: Flow) -> None:
    pid = flow.submit_and_approve(flow.proposal_file("move_nodes", changes(lab)))
    assert lab.opensm is not None and lab.opensm.proc is not None
    os.kill(lab.opensm.proc.pid, signal.SIGSTOP)
    try:
        code, _, err = flow.apply(pid, "--yes")
    finally:
        os.kill(lab.opensm.proc.pid, signal.SIGCONT)
    assert code == 3, err
    assert f"{pid}  rolled_back: failed and rolled back: opensm: verify failed" in err
    assert sinfo(cluster) == ORIGINAL
    for name in FILES:
        assert (lab.osm_dir / name).read_bytes() == lab.baseline[name]
    assert "0x8002" in pkeys(lab, "node3")
    steps = flow.steps(pid)
    assert steps[-6:] == [
        "apply.failed",
        "apply.rollback",
        "apply.undo",
        "slurm.rolled_back",
        "apply.undone",
        "apply.rollback_end",
    ]
    assert flow.history(pid)[-2:] == [("applying", "failed", "ok"), ("failed", "rolled_back", "ok")]
