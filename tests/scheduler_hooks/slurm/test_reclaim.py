"""The adapter's choice for a proposal's reclaim, on a scripted Slurm (a runner that answers sinfo, scontrol
and squeue from a small model with its own clock): requeue at once with `reclaims: allow`, drain like any
node with `as_drain`; the other leaving nodes wait as configured. The real Slurm: tests/scheduler_hooks/
apply/test_integration_slurm.py."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from proposals.model import Change
from scheduler_hooks.apply.slurm_side import SlurmSide
from scheduler_hooks.errors import CommandFailedError, SlurmDrainDeadlineError
from scheduler_hooks.slurm import ApplyRecord, Outcome, SlurmAdapter, SlurmConfig, Step
from scheduler_hooks.slurm.commands import Program

MOVE = [
    Change("slurm.partition.a.nodes", "n1,n2,n3", "n1"),
    Change("slurm.partition.b.nodes", "n4", "n2,n3,n4"),
]


@dataclass
class Job:
    node: str
    ends_at: float
    requeue: bool = True


@dataclass
class ScriptedSlurm:
    """Partitions, drained nodes and running jobs; jobs end at their time, `sleep` advances the clock."""

    jobs: dict[str, Job]
    partitions: dict[str, list[str]] = field(default_factory=lambda: {"a": ["n1", "n2", "n3"], "b": ["n4"]})
    drained: dict[str, str] = field(default_factory=dict)
    now: float = 0.0
    requeued: list[tuple[float, str]] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def running(self) -> dict[str, Job]:
        return {job_id: job for job_id, job in self.jobs.items() if job.ends_at > self.now}

    def run(self, program: Program, *args: str) -> str:
        if program == "sinfo":
            return "".join(
                f"{p} {len(n)} {','.join(n)}\n" if n else f"{p} 0\n" for p, n in self.partitions.items()
            )
        if program == "squeue":
            return "".join(f"{job_id} R {job.node}\n" for job_id, job in self.running().items())
        if args[:2] == ("--all", "--oneliner"):
            return "".join(self._node_line(name) for names in self.partitions.values() for name in names)
        if args[0] == "requeue":
            job = self.jobs[args[1]]
            if not job.requeue:
                raise CommandFailedError(f"scontrol requeue {args[1]}: job is not requeueable")
            self.requeued.append((self.now, args[1]))
            del self.jobs[args[1]]
            return ""
        words = dict(arg.split("=", 1) for arg in args[1:])
        if "PartitionName" in words:
            self.partitions[words["PartitionName"]] = words["Nodes"].split(",")
        elif words.get("State") == "DRAIN":
            self.drained |= dict.fromkeys(words["NodeName"].split(","), words["Reason"])
        elif words.get("State") == "RESUME":
            for name in words["NodeName"].split(","):
                self.drained.pop(name, None)
        return ""

    def _node_line(self, name: str) -> str:
        busy = any(job.node == name for job in self.running().values())
        state = ("ALLOCATED" if busy else "IDLE") + ("+DRAIN" if name in self.drained else "")
        partitions = ",".join(p for p, nodes in self.partitions.items() if name in nodes)
        return f"NodeName={name} State={state} Partitions={partitions} Reason={self.drained.get(name, '')}\n"


def _adapter(slurm: ScriptedSlurm, **settings: Any) -> SlurmAdapter:
    values: dict[str, Any] = {"drain_deadline_seconds": 600, "poll_interval_seconds": 1, **settings}
    return SlurmAdapter(
        SlurmConfig(Path("/etc/slurm/slurm.conf"), **values), slurm, sleep=slurm.sleep, clock=slurm.clock
    )


def _steps(record: ApplyRecord) -> list[str]:
    return [name for name, _ in record.steps]


def test_allowed_reclaim_requeues_at_once_and_the_other_node_waits_for_its_job() -> None:
    slurm = ScriptedSlurm({"11": Job("n2", ends_at=10_000), "12": Job("n3", ends_at=30)})
    record = _adapter(slurm, reclaims="allow").apply(MOVE, proposal="p1", reclaim=["n2"])
    assert record.outcome is Outcome.APPLIED
    assert _steps(record) == [
        "planned",
        "drained",
        "requeued",
        "jobs_ended",
        "partitions_set",
        "resumed",
        "verified",
    ]
    planned = record.detail(Step.PLANNED)
    assert (planned["reclaim"], planned["reclaims"], planned["requeue_at_once"]) == (["n2"], "allow", ["n2"])
    assert slurm.requeued == [(0.0, "11")]  # n2's job, before any wait; n3's job was left to end
    requeued = record.detail(Step.REQUEUED)
    assert (requeued["nodes"], requeued["jobs"], requeued["why"]) == (["n2"], ["11"], "reclaim")
    assert record.detail(Step.JOBS_ENDED)["waited_seconds"] == 30  # n3's job ended by itself
    assert slurm.partitions == {"a": ["n1"], "b": ["n2", "n3", "n4"]} and slurm.drained == {}


def test_as_drain_applies_a_reclaim_like_any_move_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    slurm = ScriptedSlurm({"11": Job("n2", ends_at=10_000)})
    with caplog.at_level(logging.WARNING), pytest.raises(SlurmDrainDeadlineError) as caught:
        _adapter(slurm).apply(MOVE, proposal="p1", reclaim=["n2"])  # reclaims: as_drain by default
    record = caught.value.record
    assert isinstance(record, ApplyRecord) and record.outcome is Outcome.GAVE_UP
    assert _steps(record) == ["planned", "drained", "resumed", "gave_up"]
    planned = record.detail(Step.PLANNED)
    assert (planned["reclaim"], planned["reclaims"], planned["requeue_at_once"]) == (["n2"], "as_drain", [])
    assert slurm.requeued == [] and slurm.now >= 600  # waited for the configured deadline
    assert slurm.partitions == {"a": ["n1", "n2", "n3"], "b": ["n4"]}
    assert "reclaims n2: applied as a drain (slurm.reclaims: as_drain): deadline 600 s, then give_up" in (
        caplog.text
    )


def test_as_drain_with_on_drain_deadline_requeue_requeues_at_the_deadline() -> None:
    slurm = ScriptedSlurm({"11": Job("n2", ends_at=10_000)})
    record = _adapter(slurm, on_drain_deadline="requeue").apply(MOVE, proposal="p1", reclaim=["n2"])
    assert record.outcome is Outcome.APPLIED
    assert slurm.requeued == [(600.0, "11")] and record.detail(Step.REQUEUED)["why"] == "deadline"


def test_without_a_reclaim_allow_changes_nothing() -> None:
    slurm = ScriptedSlurm({"11": Job("n2", ends_at=10_000)})
    with pytest.raises(SlurmDrainDeadlineError, match="jobs still running on n2 at the deadline"):
        _adapter(slurm, reclaims="allow").apply(MOVE, proposal="p1")
    assert slurm.requeued == [] and slurm.now >= 600


def test_a_reclaimed_job_that_cannot_be_requeued_gives_up_at_once() -> None:
    slurm = ScriptedSlurm({"11": Job("n2", ends_at=10_000, requeue=False)})
    with pytest.raises(SlurmDrainDeadlineError, match="job 11 could not be requeued") as caught:
        _adapter(slurm, reclaims="allow").apply(MOVE, proposal="p1", reclaim=["n2"])
    record = caught.value.record
    assert isinstance(record, ApplyRecord)
    assert _steps(record) == ["planned", "drained", "requeued", "resumed", "gave_up"]
    assert slurm.now == 0 and slurm.drained == {}
    assert slurm.partitions == {"a": ["n1", "n2", "n3"], "b": ["n4"]}


def test_a_requeued_job_that_does_not_leave_in_time_gives_up() -> None:
    slurm = ScriptedSlurm({"11": Job("n2", ends_at=10_000)})

    def requeue_but_keep_running(program: Program, *args: str) -> str:
        return "" if args[:1] == ("requeue",) else ScriptedSlurm.run(slurm, program, *args)

    slurm.run = requeue_but_keep_running  # type: ignore[method-assign]
    with pytest.raises(
        SlurmDrainDeadlineError, match="on n2 at the deadline \\(after requeueing their jobs\\)"
    ):
        _adapter(slurm, reclaims="allow", command_timeout_seconds=20).apply(
            MOVE, proposal="p1", reclaim=["n2"]
        )
    assert 20 <= slurm.now < 600  # the requeue's own time limit, not the drain deadline


def test_describe_says_what_will_happen_to_the_reclaim() -> None:
    slurm = ScriptedSlurm({})
    allow = SlurmSide(SlurmConfig(Path("/s.conf"), reclaims="allow"), _adapter(slurm, reclaims="allow"))
    lines = allow.describe(MOVE, ["n2"])
    assert lines[0].startswith(
        "reclaim n2 (slurm.reclaims: allow): drain, and requeue the jobs running there at once"
    )
    assert (
        lines[1]
        == "drain n3 and wait for their running jobs to end (deadline 3600 s, then give up and resume)"
    )
    as_drain = SlurmSide(SlurmConfig(Path("/s.conf")), _adapter(slurm))
    lines = as_drain.describe(MOVE, ["n2"])
    assert lines[0].startswith("drain n2,n3 and wait")
    assert lines[1] == (
        "the proposal reclaims n2: applied as a drain (slurm.reclaims: as_drain): nothing is requeued for it"
    )
    assert not any("reclaim" in line for line in as_drain.describe(MOVE))


NATURAL_MOVE = [
    Change("slurm.partition.a.nodes", "node1,node2,node10", "node1"),
    Change("slurm.partition.b.nodes", "node3", "node2,node3,node10"),
]


def _natural_slurm(jobs: dict[str, Job]) -> ScriptedSlurm:
    return ScriptedSlurm(jobs, partitions={"a": ["node1", "node2", "node10"], "b": ["node3"]})


def test_the_dry_run_lists_leaving_nodes_in_natural_order() -> None:
    slurm = _natural_slurm({})
    allow = SlurmSide(SlurmConfig(Path("/s.conf"), reclaims="allow"), _adapter(slurm, reclaims="allow"))
    lines = allow.describe(NATURAL_MOVE, ["node2", "node10"])
    assert lines[0].startswith("reclaim node2,node10 (slurm.reclaims: allow)")
    assert lines[-2] == "resume node2,node10"
    as_drain = SlurmSide(SlurmConfig(Path("/s.conf")), _adapter(slurm))
    lines = as_drain.describe(NATURAL_MOVE, ["node2", "node10"])
    assert lines[0].startswith("drain node2,node10 and wait")
    assert lines[1].startswith("the proposal reclaims node2,node10: applied as a drain")


def test_the_record_lists_leaving_and_requeued_nodes_in_natural_order() -> None:
    slurm = _natural_slurm({"11": Job("node10", ends_at=10_000), "12": Job("node2", ends_at=10_000)})
    record = _adapter(slurm, reclaims="allow").apply(NATURAL_MOVE, proposal="p1", reclaim=["node2", "node10"])
    assert record.outcome is Outcome.APPLIED
    planned = record.detail(Step.PLANNED)
    assert planned["leaving"] == planned["drain"] == ["node2", "node10"]
    assert planned["reclaim"] == planned["requeue_at_once"] == ["node2", "node10"]
    assert record.detail(Step.REQUEUED)["nodes"] == ["node2", "node10"]
    assert record.detail(Step.JOBS_ENDED)["nodes"] == ["node2", "node10"]
