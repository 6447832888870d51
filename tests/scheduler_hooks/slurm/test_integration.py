"""The Slurm adapter against a real Slurm 22.05: slurmctld, eight slurmd, partitions training and inference.

One cluster serves the module; after each test the jobs are cancelled, the drained nodes resumed, the
partitions and slurm.conf put back. Busy nodes run `sbatch --wrap 'sleep N'` jobs; a job must complete
(exit 0) before its node changes partition. `scontrol update` is made to fail half-way by a wrapper
`scontrol` in the configured bin dir that breaks the second partition update the way a real failure does.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from proposals.model import Change
from scheduler_hooks.errors import (
    ChangeRejectedError,
    SlurmApplyFailedError,
    SlurmDrainDeadlineError,
    SlurmStaleChangeError,
)
from scheduler_hooks.slurm import ApplyRecord, Outcome, SlurmAdapter, SlurmConfig, Step
from scheduler_hooks.slurm.slurmconf import partition_nodes
from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason, wait_until

SKIP_REASON = slurm_skip_reason()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")]

ORIGINAL = {"training": [f"node{i}" for i in range(1, 5)], "inference": [f"node{i}" for i in range(5, 9)]}
MOVED = {"training": ["node1", "node2", "node3"], "inference": ["node4", *ORIGINAL["inference"]]}
T, I = "slurm.partition.training.nodes", "slurm.partition.inference.nodes"  # noqa: E741
FULL_RUN = ["planned", "drained", "jobs_ended", "partitions_set", "resumed", "verified"]


class CrashError(Exception):
    """Stands for the orchestrator dying (kill -9) right after it recorded a step."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes=8, partitions=ORIGINAL, cpus_per_node=2) as c:
        yield c


@pytest.fixture
def slurm(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The shared cluster, put back as it started after the test."""
    original_conf = cluster.conf_path.read_text()
    yield cluster
    cluster.run("scancel", "--quiet", "--user=root", check=False)
    wait_until(lambda: not cluster.squeue_ids(), 20, "jobs to end", interval=0.1)
    cluster.conf_path.write_text(original_conf)
    for name, nodes in ORIGINAL.items():
        cluster.scontrol("update", f"PartitionName={name}", f"Nodes={','.join(nodes)}")
    drained = [node for node, state in cluster.node_states().items() if "drain" in state]
    if drained:
        cluster.set_node_state(drained, "RESUME")
    cluster.wait_idle(timeout=20)


def _adapter(cluster: SlurmCluster, **settings: Any) -> SlurmAdapter:
    values: dict[str, Any] = {"poll_interval_seconds": 0.2, "drain_deadline_seconds": 30, **settings}
    return SlurmAdapter(SlurmConfig(cluster.conf_path, command_timeout_seconds=20, **values))


def _changes(before: Mapping[str, Sequence[str]], after: Mapping[str, Sequence[str]]) -> list[Change]:
    return [
        Change(f"slurm.partition.{p}.nodes", ",".join(before[p]), ",".join(after[p])) for p in sorted(after)
    ]


MOVE = _changes(ORIGINAL, MOVED)


def _members(cluster: SlurmCluster) -> dict[str, list[str]]:
    """What sinfo says, partition by partition (node counts trusted)."""
    out = cluster.run("sinfo", "--noheader", "--all", "--format=%R %D %N").stdout
    members = {}
    for line in out.splitlines():
        name, count, *nodes = line.split()
        members[name] = cluster.run("scontrol", "show", "hostnames", *nodes).stdout.split() if nodes else []
        assert len(members[name]) == int(count)
    return members


def _job(cluster: SlurmCluster, job_id: int) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", cluster.scontrol("--oneliner", "show", "job", str(job_id))))


class Steps:
    """An on_step that keeps what it is told, as an orchestrator's audit log would."""

    def __init__(self, crash_at: str | None = None) -> None:
        self.seen: list[tuple[str, Mapping[str, Any]]] = []
        self.crash_at = crash_at

    def __call__(self, step: str, detail: Mapping[str, Any]) -> None:
        self.seen.append((step, detail))
        if step == self.crash_at:
            raise CrashError(step)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.seen]


def test_move_an_idle_node(slurm: SlurmCluster) -> None:
    adapter, steps = _adapter(slurm), Steps()
    assert adapter.validate(MOVE) == [] and adapter.stale(MOVE) == []
    record = adapter.apply(MOVE, steps, proposal="idle1")
    assert record.outcome is Outcome.APPLIED and steps.names == FULL_RUN
    assert _members(slurm) == MOVED
    assert adapter.read(I) == "node4,node5,node6,node7,node8"
    assert steps.seen[1][1] == {"nodes": ["node4"], "reason": "ibpool move idle1"}
    slurm.wait_idle(["node4"], timeout=10)  # resumed: `idle*` for a moment, then idle
    job = slurm.submit("inference", seconds=1, nodelist=["node4"])
    slurm.wait_job_state(job, "RUNNING", timeout=20)  # node4 now serves inference


def test_move_a_busy_node_waits_for_its_job(slurm: SlurmCluster) -> None:
    job = slurm.submit("training", seconds=3, nodelist=["node4"])
    slurm.wait_job_state(job, "RUNNING", timeout=20)
    states: dict[str, str] = {}
    set_at: list[datetime] = []

    def on_step(step: str, detail: Mapping[str, Any]) -> None:
        states[step] = _job(slurm, job)["JobState"]
        if step == Step.PARTITIONS_SET:
            set_at.append(datetime.now())

    record = _adapter(slurm).apply(MOVE, on_step, proposal="busy1")
    assert record.ok and _members(slurm) == MOVED
    assert states["drained"] == "RUNNING"  # drained while it ran, not killed
    assert states["partitions_set"] == "COMPLETED"
    info = _job(slurm, job)
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0")
    assert datetime.fromisoformat(info["EndTime"]) <= set_at[0]
    assert record.detail(Step.JOBS_ENDED)["waited_seconds"] > 0


def test_deadline_gives_up_resumes_and_changes_nothing(slurm: SlurmCluster) -> None:
    job = slurm.submit("training", seconds=60, nodelist=["node4"])
    slurm.wait_job_state(job, "RUNNING", timeout=20)
    steps = Steps()
    with pytest.raises(SlurmDrainDeadlineError) as caught:
        _adapter(slurm, drain_deadline_seconds=1).apply(MOVE, steps, proposal="late1")
    record = caught.value.record
    assert isinstance(record, ApplyRecord) and record.outcome is Outcome.GAVE_UP
    assert steps.names == ["planned", "drained", "resumed", "gave_up"]
    assert "node4" in record.error
    assert _members(slurm) == ORIGINAL
    assert "drain" not in slurm.node_states()["node4"]
    assert _job(slurm, job)["JobState"] == "RUNNING"


def test_deadline_requeues_the_running_job_and_the_move_completes(slurm: SlurmCluster) -> None:
    """An urgent reclaim: the job on node4 is requeued at the deadline, node4 joins inference at once, and
    the inference job that waited for a node starts on it."""
    job = slurm.submit("training", seconds=600, nodelist=["node4"])
    owner = slurm.queue_behind_full("inference", len(ORIGINAL["inference"]))  # every inference node busy
    slurm.wait_job_state(job, "RUNNING", timeout=20)
    steps = Steps()
    record = _adapter(slurm, drain_deadline_seconds=1, on_drain_deadline="requeue").apply(
        MOVE, steps, proposal="reclaim1"
    )
    assert record.outcome is Outcome.APPLIED
    assert steps.names == ["planned", "drained", "requeued", *FULL_RUN[2:]]
    assert record.detail(Step.REQUEUED)["nodes"] == ["node4"]
    assert record.detail(Step.REQUEUED)["jobs"] == [str(job)]
    assert _members(slurm) == MOVED
    info = _job(slurm, job)
    assert info["JobState"] == "PENDING" and info["Restarts"] == "1"  # requeued, not killed or kept
    slurm.wait_job_state(owner, "RUNNING", timeout=30)
    assert _job(slurm, owner)["NodeList"] == "node4"  # the owner's job runs on the reclaimed node


def test_a_job_that_cannot_be_requeued_makes_the_move_give_up(slurm: SlurmCluster) -> None:
    job = slurm.submit("training", seconds=600, nodelist=["node4"], extra=["--no-requeue"])
    slurm.wait_job_state(job, "RUNNING", timeout=20)
    steps = Steps()
    with pytest.raises(SlurmDrainDeadlineError, match=f"job {job} could not be requeued") as caught:
        _adapter(slurm, drain_deadline_seconds=1, on_drain_deadline="requeue").apply(
            MOVE, steps, proposal="reclaim2"
        )
    record = caught.value.record
    assert isinstance(record, ApplyRecord) and record.outcome is Outcome.GAVE_UP
    assert steps.names == ["planned", "drained", "requeued", "resumed", "gave_up"]
    assert steps.seen[2][1]["jobs"] == []
    assert _members(slurm) == ORIGINAL
    assert "drain" not in slurm.node_states()["node4"]
    assert _job(slurm, job)["JobState"] == "RUNNING"


def _failing_scontrol(bin_dir: Path) -> Path:
    """A bin dir whose scontrol breaks the 2nd partition update like a real failure, then snapshots sinfo."""
    bin_dir.mkdir()
    real = {name: shutil.which(name) for name in ("scontrol", "sinfo", "squeue")}
    for name in ("sinfo", "squeue"):
        (bin_dir / name).symlink_to(str(real[name]))
    (bin_dir / "scontrol").write_text(
        f"""#!/bin/bash
if [ "$1" = update ] && [[ "$2" == PartitionName=* ]]; then
    n=$(( $(cat {bin_dir}/count 2>/dev/null || echo 0) + 1 )); echo $n > {bin_dir}/count
    if [ $n = 2 ]; then
        {real["scontrol"]} update "$2" 'Nodes=node[1-'; rc=$?
        {real["sinfo"]} --noheader --all --format='%R %D %N' > {bin_dir}/after-failure
        exit $rc
    fi
fi
exec {real["scontrol"]} "$@"
"""
    )
    (bin_dir / "scontrol").chmod(0o755)
    return bin_dir


def test_scontrol_failing_half_way_is_rolled_back(slurm: SlurmCluster, tmp_path: Path) -> None:
    bin_dir = _failing_scontrol(tmp_path / "bin")
    steps = Steps()
    with pytest.raises(SlurmApplyFailedError, match="exit 1") as caught:
        _adapter(slurm, bin_dir=bin_dir).apply(MOVE, steps, proposal="half1")
    # The first update (training loses node4) went through; the second left inference with no node at all.
    assert (bin_dir / "after-failure").read_text().splitlines() == ["training 3 node[1-3]", "inference 0 "]
    record = caught.value.record
    assert isinstance(record, ApplyRecord) and record.outcome is Outcome.ROLLED_BACK
    assert steps.names == ["planned", "drained", "jobs_ended", "rolled_back"]
    assert steps.seen[-1][1]["resumed"] == ["node4"]
    assert _members(slurm) == ORIGINAL
    assert "drain" not in slurm.node_states()["node4"]
    assert (bin_dir / "count").read_text().strip() == "4"  # two updates to break, two to restore


def test_persisted_change_survives_reconfigure(slurm: SlurmCluster) -> None:
    original = slurm.conf_path.read_text()
    _adapter(slurm).apply(MOVE, proposal="conf0")
    slurm.scontrol("reconfigure")  # answers once slurmctld has re-read slurm.conf
    assert _members(slurm) == ORIGINAL  # the gotcha: scontrol-only changes are lost

    steps = Steps()
    record = _adapter(slurm, persist=True).apply(MOVE, steps, proposal="conf1")
    assert steps.names == [*FULL_RUN, "persisted"]
    assert partition_nodes(slurm.conf_path.read_text()) == {p: tuple(n) for p, n in MOVED.items()}
    assert Path(f"{slurm.conf_path}.ibpool-prev").read_text() == original
    slurm.scontrol("reconfigure")
    assert _members(slurm) == MOVED

    undone = _adapter(slurm, persist=True).rollback(record)
    assert undone.outcome is Outcome.ROLLED_BACK and undone.detail(Step.ROLLED_BACK)["slurm_conf"] == "backup"
    assert slurm.conf_path.read_text() == original and _members(slurm) == ORIGINAL
    slurm.scontrol("reconfigure")
    assert _members(slurm) == ORIGINAL


def test_applying_twice_is_a_noop(slurm: SlurmCluster) -> None:
    adapter = _adapter(slurm)
    assert adapter.apply(MOVE, proposal="twice").ok
    steps = Steps()
    again = adapter.apply(MOVE, steps, proposal="twice")
    assert again.outcome is Outcome.NOOP and again.steps == () and steps.seen == []
    assert adapter.stale(MOVE) == [] and _members(slurm) == MOVED


def test_stale_before_is_refused_and_nothing_moves(slurm: SlurmCluster) -> None:
    adapter = _adapter(slurm)
    stale = _changes({**ORIGINAL, "training": ["node1", "node2", "node3", "node4", "node5"]}, MOVED)
    assert adapter.stale(stale) == [T]
    with pytest.raises(SlurmStaleChangeError, match=T):
        adapter.apply(stale, proposal="stale1")
    assert _members(slurm) == ORIGINAL
    assert set(slurm.node_states().values()) == {"idle"}


def test_invalid_changes_are_refused_with_every_problem(slurm: SlurmCluster) -> None:
    bad = [
        Change(T, "node1,node2,node3,node4", "node1,node9"),
        Change("slurm.partition.gpu.nodes", "", "node4"),
    ]
    with pytest.raises(ChangeRejectedError) as caught:
        _adapter(slurm).apply(bad, proposal="bad1")
    assert caught.value.problems == [
        f"changes[0] ({T}).after: no such node(s) in Slurm: node9",
        "changes[1] (slurm.partition.gpu.nodes): no partition gpu in Slurm",
    ]
    assert _members(slurm) == ORIGINAL


def test_a_node_drained_by_an_admin_stays_drained(slurm: SlurmCluster) -> None:
    slurm.set_node_state(["node4"], "DRAIN", "bad dimm")
    record = _adapter(slurm).apply(MOVE, proposal="admin1")
    assert record.ok and record.drained == () and _members(slurm) == MOVED
    assert slurm.node_states()["node4"] == "drained"
    reasons = slurm.run("sinfo", "--noheader", "--Node", "--nodes=node4", "--format=%E").stdout
    assert reasons.strip() == "bad dimm"


@pytest.mark.parametrize(
    ("crash_at", "outcome", "members"),
    [("partitions_set", Outcome.APPLIED, MOVED), ("drained", Outcome.ROLLED_BACK, ORIGINAL)],
)
def test_recover_after_a_crash(
    slurm: SlurmCluster, crash_at: str, outcome: Outcome, members: Mapping[str, Sequence[str]]
) -> None:
    steps = Steps(crash_at=crash_at)
    with pytest.raises(CrashError):
        _adapter(slurm).apply(MOVE, steps, proposal="crash1")
    assert "drain" in slurm.node_states()["node4"]  # left mid-way
    record = ApplyRecord.from_steps("crash1", steps.seen)
    recovered = _adapter(slurm).recover(record)
    assert recovered.outcome is outcome
    assert _members(slurm) == members
    assert "drain" not in slurm.node_states()["node4"]
    assert _adapter(slurm).recover(recovered) is recovered  # finished: nothing more to do
