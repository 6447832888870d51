"""`ibpool proposals` + `ibpool apply` against a real Slurm: slurmctld, eight slurmd, two partitions.

A move_nodes proposal moves busy node4 from training to inference: its job ends normally before the move
(drained, not killed), the partitions read back right with our own `sinfo` call, slurm.conf is updated,
and a second apply changes nothing. A move killed with -9 after draining is rolled back by `--recover`.
A reclaim proposal (its `reclaim` names node4) requeues node4's job at once with `reclaims: allow`, and
with the default `as_drain` waits for the deadline like any move.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from scheduler_hooks.slurm.slurmconf import partition_nodes
from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason, wait_until
from tests.scheduler_hooks.apply.flow import Flow, sinfo

SKIP_REASON = slurm_skip_reason()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")]

ORIGINAL = {"training": [f"node{i}" for i in range(1, 5)], "inference": [f"node{i}" for i in range(5, 9)]}
MOVED = {"training": ["node1", "node2", "node3"], "inference": ["node4", *ORIGINAL["inference"]]}
T, I = "slurm.partition.training.nodes", "slurm.partition.inference.nodes"  # noqa: E741


def move(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """The changes of a move from `before` to `after`."""
    return [
        (target, ",".join(before[name]), ",".join(after[name]))
        for target, name in ((T, "training"), (I, "inference"))
    ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    root = tmp_path_factory.mktemp("apply-slurm")
    with SlurmCluster(root, nodes=8, partitions=ORIGINAL, cpus_per_node=2) as running:
        yield running


@pytest.fixture
def flow(
    cluster: SlurmCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Flow]:
    """An apply config for the cluster (persisting into slurm.conf); the cluster put back afterwards."""
    original_conf = cluster.conf_path.read_text()
    slurm = {
        "slurm_conf": str(cluster.conf_path),
        "persist": True,
        "poll_interval_seconds": 0.2,
        "drain_deadline_seconds": 30,
        "command_timeout_seconds": 20,
    }
    config = tmp_path / "apply.yaml"
    config.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"), "slurm": slurm}))
    monkeypatch.setenv("IBPOOL_DB", str(tmp_path / "ibpool.db"))
    yield Flow(tmp_path, capsys, config)
    cluster.run("scancel", "--quiet", "--user=root", check=False)
    wait_until(lambda: not cluster.squeue_ids(), 20, "jobs to end", interval=0.1)
    cluster.conf_path.write_text(original_conf)
    for name, nodes in ORIGINAL.items():
        cluster.scontrol("update", f"PartitionName={name}", f"Nodes={','.join(nodes)}")
    drained = [node for node, state in cluster.node_states().items() if "drain" in state]
    if drained:
        cluster.set_node_state(drained, "RESUME")
    cluster.wait_idle(timeout=20)


def job(cluster: SlurmCluster, job_id: int) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", cluster.scontrol("--oneliner", "show", "job", str(job_id))))


def test_move_nodes_applied_read_back_and_idempotent(cluster: SlurmCluster, flow: Flow) -> None:
    busy = cluster.submit("training", seconds=2, nodelist=["node4"])
    cluster.wait_job_state(busy, "RUNNING", timeout=20)
    pid = flow.submit_and_approve(flow.proposal_file("move_nodes", move(ORIGINAL, MOVED)))

    code, out, err = flow.apply(pid)  # dry run
    assert code == 0, err
    assert "    - drain node4 and wait for their running jobs to end" in out
    assert "    - scontrol update PartitionName=training Nodes=node1,node2,node3" in out
    assert sinfo(cluster) == ORIGINAL and flow.steps(pid) == []

    code, out, err = flow.apply(pid, "--yes")
    assert code == 0, err
    assert out.startswith(f"{pid}  applied: applied and verified (slurm applied)")
    assert sinfo(cluster) == MOVED
    info = job(cluster, busy)
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0")  # drained, not killed
    assert partition_nodes(cluster.conf_path.read_text()) == {p: tuple(n) for p, n in MOVED.items()}
    steps = flow.steps(pid)
    assert steps == [
        "apply.start",
        "apply.begin",
        "slurm.planned",
        "slurm.drained",
        "slurm.jobs_ended",
        "slurm.partitions_set",
        "slurm.resumed",
        "slurm.verified",
        "slurm.persisted",
        "apply.done",
    ]
    cluster.wait_idle(["node4"], timeout=10)

    states, conf_mtime = cluster.node_states(), cluster.conf_path.stat().st_mtime_ns
    code, out, err = flow.apply(pid, "--yes")
    assert (code, out.strip()) == (0, f"{pid}  already_applied: already applied; nothing changed"), err
    assert sinfo(cluster) == MOVED and cluster.node_states() == states
    assert cluster.conf_path.stat().st_mtime_ns == conf_mtime and flow.steps(pid) == steps


def test_killed_after_draining_then_rolled_back_by_recover(cluster: SlurmCluster, flow: Flow) -> None:
    pid = flow.submit_and_approve(flow.proposal_file("move_nodes", move(ORIGINAL, MOVED)))
    flow.crash("slurm.drained", 1, pid, "--yes")
    assert "drain" in cluster.node_states()["node4"]  # left mid-way
    assert flow.history(pid)[-1] == ("approved", "applying", "ok")

    code, out, err = flow.apply("--recover")
    assert code == 0, err
    assert out.startswith(f"{pid}  recovered: rolled_back: failed and rolled back: slurm: interrupted")
    assert sinfo(cluster) == ORIGINAL
    assert "drain" not in cluster.node_states()["node4"]
    code, out, _ = flow.proposals("show", pid)
    shown = json.loads(out)
    assert [s["step"] for s in shown["steps"]] == [
        "apply.start",
        "apply.begin",
        "slurm.planned",
        "slurm.drained",
        "slurm.rolled_back",
        "apply.failed",
        "apply.rollback",
        "apply.rollback_end",
    ]
    assert [(a["from_state"], a["to_state"]) for a in shown["audit"]][-2:] == [
        ("applying", "failed"),
        ("failed", "rolled_back"),
    ]


def configure(flow: Flow, **slurm: object) -> None:
    """Set keys of the apply config's slurm section."""
    data = yaml.safe_load(flow.config.read_text())
    data["slurm"].update(slurm)
    flow.config.write_text(yaml.safe_dump(data))


def test_reclaim_allowed_requeues_the_job_on_the_node_and_moves_it_at_once(
    cluster: SlurmCluster, flow: Flow
) -> None:
    """node4 runs a 10-minute training job; inference is full and its owner's job waits. The deadline is
    30 s and `give_up`: only the reclaim's requeue can move node4, and then the owner's job runs there."""
    configure(flow, reclaims="allow", on_drain_deadline="give_up")
    busy = cluster.submit("training", seconds=600, nodelist=["node4"])
    owner = cluster.queue_behind_full("inference", len(ORIGINAL["inference"]))  # every inference node busy
    cluster.wait_job_state(busy, "RUNNING", timeout=20)
    pid = flow.submit_and_approve(flow.proposal_file("move_nodes", move(ORIGINAL, MOVED), reclaim="node4"))

    code, out, err = flow.apply(pid)  # dry run
    assert code == 0, err
    assert (
        "    - reclaim node4 (slurm.reclaims: allow): drain, and requeue the jobs running there at once"
        in out
    )

    code, out, err = flow.apply(pid, "--yes")
    assert code == 0, err
    assert out.startswith(f"{pid}  applied: applied and verified (slurm applied)")
    assert sinfo(cluster) == MOVED
    assert flow.steps(pid)[2:5] == ["slurm.planned", "slurm.drained", "slurm.requeued"]
    (planned,) = flow.details(pid, "slurm.planned")
    assert (planned["reclaim"], planned["reclaims"], planned["requeue_at_once"]) == (
        ["node4"],
        "allow",
        ["node4"],
    )
    (requeued,) = flow.details(pid, "slurm.requeued")
    assert (requeued["nodes"], requeued["jobs"], requeued["why"]) == (["node4"], [str(busy)], "reclaim")
    info = job(cluster, busy)
    assert info["JobState"] == "PENDING" and info["Restarts"] == "1"  # requeued, not killed or kept
    cluster.wait_job_state(owner, "RUNNING", timeout=30)
    assert job(cluster, owner)["NodeList"] == "node4"  # the owner's job runs on the reclaimed node


def test_reclaim_as_drain_waits_for_the_deadline_and_kills_nothing(cluster: SlurmCluster, flow: Flow) -> None:
    """The default `reclaims: as_drain`: the same proposal drains node4 and, its job outliving the 2-second
    deadline (`give_up`), the move gives up with node4 resumed and its job still running."""
    configure(flow, drain_deadline_seconds=2, on_drain_deadline="give_up")
    busy = cluster.submit("training", seconds=600, nodelist=["node4"])
    cluster.wait_job_state(busy, "RUNNING", timeout=20)
    pid = flow.submit_and_approve(flow.proposal_file("move_nodes", move(ORIGINAL, MOVED), reclaim="node4"))

    code, out, err = flow.apply(pid)  # dry run
    assert code == 0, err
    assert (
        "    - drain node4 and wait for their running jobs to end (deadline 2 s, then give up and resume)"
        in out
    )
    assert "    - the proposal reclaims node4: applied as a drain (slurm.reclaims: as_drain)" in out

    code, out, err = flow.apply(pid, "--yes")
    assert code == 3, out
    assert "jobs still running on node4 at the deadline" in err
    assert flow.steps(pid)[2:6] == ["slurm.planned", "slurm.drained", "slurm.resumed", "slurm.gave_up"]
    (planned,) = flow.details(pid, "slurm.planned")
    assert (planned["reclaim"], planned["reclaims"], planned["requeue_at_once"]) == (
        ["node4"],
        "as_drain",
        [],
    )
    assert sinfo(cluster) == ORIGINAL
    assert "drain" not in cluster.node_states()["node4"]
    info = job(cluster, busy)
    assert (info["JobState"], info["Restarts"]) == ("RUNNING", "0")  # nothing killed
