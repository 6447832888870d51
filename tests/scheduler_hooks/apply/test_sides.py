"""The sides: OpenSMSide over the real OpenSMAdapter and a fake OpenSM; SlurmSide over a scripted adapter."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from proposals.model import Change
from scheduler_hooks.apply.opensm_side import OpenSMSide
from scheduler_hooks.apply.sides import SideFailedError, SideResult
from scheduler_hooks.apply.slurm_side import SlurmSide
from scheduler_hooks.errors import CommandFailedError, RecoveryFailedError, SlurmApplyFailedError
from scheduler_hooks.opensm import record as records
from scheduler_hooks.slurm import ApplyRecord, Outcome, SlurmAdapter, SlurmConfig
from scheduler_hooks.slurm.record import OnStep
from tests.scheduler_hooks.apply.fakes import Crash
from tests.scheduler_hooks.opensm.fake_opensm import FakeOpenSM

WEIGHTS = Change("opensm.vlarb_low", "1:64,2:32", "1:10,2:20,3:30")
MEMBERS = Change("opensm.partition.training.members", "node1,node2", "node1")
OSM_RUN = ["planned", "file_written", "file_written", "files_written", "signalled", "verified"]


class Sink:
    """Keeps (step, detail) pairs like the store; dies (Crash) after the `crash_at`-th one."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.seen: list[tuple[str, Mapping[str, Any]]] = []
        self.crash_at = crash_at

    def __call__(self, step: str, detail: Mapping[str, Any]) -> None:
        self.seen.append((step, dict(detail)))
        if len(self.seen) == self.crash_at:
            raise Crash(step)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.seen]


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeOpenSM]:
    with FakeOpenSM(tmp_path / "osm") as running:
        yield running


def side_of(fake: FakeOpenSM, tmp_path: Path) -> OpenSMSide:
    return OpenSMSide(fake.config(tmp_path / "state"), fake.adapter(tmp_path / "state"))


def test_opensm_status_apply_and_describe(fake: FakeOpenSM, tmp_path: Path) -> None:
    side = side_of(fake, tmp_path)
    stale = Change("opensm.vlarb_high", "0:9", "0:8")
    assert side.status([WEIGHTS, MEMBERS, stale]) == {
        WEIGHTS.target: "before",
        MEMBERS.target: "before",
        stale.target: "stale",
    }
    assert side.validate([Change("opensm.vlarb_low", "1:64,2:32", "1:300")]) == [
        "opensm.vlarb_low: entry 1: weight 300 is out of range 0-255"
    ]
    lines = side.describe([WEIGHTS, MEMBERS])
    assert lines[0].endswith(f"{fake.paths['opensm.conf']}, {fake.paths['partitions.conf']}")
    assert "smpquery pkeys, smpquery vlarb" in lines[2]
    sink = Sink()
    assert side.apply("p1", [WEIGHTS, MEMBERS], sink) is SideResult.APPLIED
    assert sink.names == OSM_RUN and len({d["record"] for _, d in sink.seen}) == 1
    assert side.status([WEIGHTS, MEMBERS]) == {WEIGHTS.target: "after", MEMBERS.target: "after"}
    assert side.apply("p1", [WEIGHTS, MEMBERS], Sink()) is SideResult.NOOP
    before = fake.hups
    side.rollback("p1", [WEIGHTS, MEMBERS], sink.seen, Sink())
    assert side.read(WEIGHTS.target) == WEIGHTS.before and fake.hups == before + 1
    side.close()


def test_opensm_verify_failure_is_undone_by_the_side(fake: FakeOpenSM, tmp_path: Path) -> None:
    side = side_of(fake, tmp_path)
    fake.deaf = True
    original = fake.read()
    with pytest.raises(SideFailedError, match="verify failed") as caught:
        side.apply("p1", [WEIGHTS], Sink())
    assert caught.value.undone and fake.read() == original


def test_opensm_rollback_that_cannot_restore_is_a_failure(fake: FakeOpenSM, tmp_path: Path) -> None:
    side = side_of(fake, tmp_path)
    sink = Sink()
    side.apply("p1", [WEIGHTS], sink)
    fake.paths["opensm.conf"].write_text("# edited by hand\n")
    with pytest.raises(SideFailedError, match="changed by someone else") as caught:
        side.rollback("p1", [WEIGHTS], sink.seen, Sink())
    assert not caught.value.undone


@pytest.mark.parametrize("crash_at", range(1, len(OSM_RUN) + 1))
def test_opensm_recovery_from_each_recorded_step(fake: FakeOpenSM, tmp_path: Path, crash_at: int) -> None:
    original = fake.read()
    sink = Sink(crash_at)
    with pytest.raises(Crash):
        side_of(fake, tmp_path).apply("p1", [WEIGHTS, MEMBERS], sink)
    fresh = side_of(fake, tmp_path)
    after = Sink()
    result = fresh.recover("p1", [WEIGHTS, MEMBERS], sink.seen, after)
    if crash_at <= 2:  # planned, or one of two files written: undone
        assert result is SideResult.ROLLED_BACK and fake.read() == original
        assert fresh.read(WEIGHTS.target) == WEIGHTS.before
    else:  # both files written: signalled (again) and verified
        assert result is SideResult.APPLIED
        assert fresh.read(WEIGHTS.target) == WEIGHTS.after and fresh.read(MEMBERS.target) == MEMBERS.after
    assert records.unfinished(tmp_path / "state") == []
    assert fresh.recover("p1", [WEIGHTS, MEMBERS], sink.seen + after.seen, Sink()) is result


def test_opensm_recovery_finds_a_record_saved_before_its_first_step_was(
    fake: FakeOpenSM, tmp_path: Path
) -> None:
    sink = Sink(crash_at=3)  # planned, file_written, file_written: partly written
    with pytest.raises(Crash):
        side_of(fake, tmp_path).apply("p1", [WEIGHTS, MEMBERS], sink)
    # The store never heard of the record: only the changes lead to it.
    result = side_of(fake, tmp_path).recover("p1", [WEIGHTS, MEMBERS], [], Sink())
    assert result is SideResult.APPLIED or result is SideResult.ROLLED_BACK
    assert records.unfinished(tmp_path / "state") == []


def test_opensm_recovery_with_nothing_recorded(fake: FakeOpenSM, tmp_path: Path) -> None:
    side = side_of(fake, tmp_path)
    assert side.recover("p1", [WEIGHTS], [], Sink()) is SideResult.UNTOUCHED
    side.apply("p2", [WEIGHTS], Sink())
    assert side.recover("p1", [WEIGHTS], [], Sink()) is SideResult.NOOP  # already at after


# --- Slurm ----------------------------------------------------------------------------------------

SLURM = [Change("slurm.partition.a.nodes", "n1,n2", "n1"), Change("slurm.partition.b.nodes", "n3", "n2,n3")]
PLANNED: dict[str, Any] = {
    "partitions": {
        "a": {"before": ["n1", "n2"], "after": ["n1"]},
        "b": {"before": ["n3"], "after": ["n2", "n3"]},
    },
    "leaving": ["n2"],
    "drain": ["n2"],
    "reason": "ibpool move p1",
    "persist": False,
}


class ScriptedSlurm:
    """Stands for SlurmAdapter: reports `steps`, then raises `error` (if any)."""

    def __init__(self, steps: Sequence[str] = (), error: Exception | None = None) -> None:
        self.steps = steps
        self.error = error
        self.calls: list[tuple[str, ApplyRecord]] = []
        self.reclaim: tuple[str, ...] | None = None  # what the last apply was given

    def apply(
        self,
        changes: Sequence[Change],
        on_step: OnStep | None = None,
        proposal: str = "",
        reclaim: Collection[str] = (),
    ) -> ApplyRecord:
        self.reclaim = tuple(reclaim)
        record = ApplyRecord(proposal)
        for step in self.steps:
            detail = PLANNED if step == "planned" else {}
            record = record.with_step(step, detail)
            assert on_step is not None
            on_step(step, detail)
        if self.error is not None:
            raise self.error
        return ApplyRecord(proposal, record.steps, Outcome.APPLIED if self.steps else Outcome.NOOP)

    def rollback(self, record: ApplyRecord, on_step: OnStep | None = None) -> ApplyRecord:
        self.calls.append(("rollback", record))
        if self.error is not None:
            raise self.error
        return record

    def recover(self, record: ApplyRecord, on_step: OnStep | None = None) -> ApplyRecord:
        self.calls.append(("recover", record))
        if self.error is not None:
            raise self.error
        return ApplyRecord(record.proposal, record.steps, Outcome.APPLIED)


def slurm_side(adapter: ScriptedSlurm) -> SlurmSide:
    return SlurmSide(SlurmConfig(Path("/etc/slurm/slurm.conf")), cast(SlurmAdapter, adapter))


@pytest.mark.parametrize(
    ("steps", "undone"),
    [
        ((), True),  # failed before anything changed
        (("planned", "drained"), False),  # stopped part-way without undoing
        (("planned", "drained", "jobs_ended", "rolled_back"), True),
        (("planned", "drained", "resumed", "gave_up"), True),
    ],
)
def test_slurm_failure_says_whether_it_was_undone(steps: tuple[str, ...], undone: bool) -> None:
    adapter = ScriptedSlurm(steps, SlurmApplyFailedError("boom", None))
    with pytest.raises(SideFailedError, match="slurm: boom") as caught:
        slurm_side(adapter).apply("p1", SLURM, Sink())
    assert caught.value.undone is undone


def test_slurm_apply_results() -> None:
    full = ("planned", "drained", "jobs_ended", "partitions_set", "resumed", "verified")
    sink = Sink()
    assert slurm_side(ScriptedSlurm(full)).apply("p1", SLURM, sink) is SideResult.APPLIED
    assert sink.names == list(full)
    assert slurm_side(ScriptedSlurm(())).apply("p1", SLURM, Sink()) is SideResult.NOOP


def test_slurm_rollback_rebuilds_the_record_from_the_steps() -> None:
    adapter = ScriptedSlurm()
    recorded: list[tuple[str, Mapping[str, Any]]] = [
        ("planned", PLANNED),
        ("drained", {"nodes": ["n2"]}),
        ("partitions_set", {}),
    ]
    slurm_side(adapter).rollback("p1", SLURM, recorded, Sink())
    ((call, record),) = adapter.calls
    assert call == "rollback" and [p.partition for p in record.plans] == ["a", "b"]
    slurm_side(adapter).rollback("p1", SLURM, [], Sink())  # nothing planned: nothing to undo
    slurm_side(adapter).rollback("p1", SLURM, [*recorded, ("rolled_back", {})], Sink())
    assert len(adapter.calls) == 1
    failing = ScriptedSlurm(error=RecoveryFailedError("scontrol down"))
    with pytest.raises(SideFailedError, match="rollback failed: scontrol down"):
        slurm_side(failing).rollback("p1", SLURM, recorded, Sink())


@pytest.mark.parametrize(
    ("recorded", "error", "result"),
    [
        ([("planned", PLANNED), ("drained", {})], None, SideResult.APPLIED),
        ([("planned", PLANNED), ("drained", {})], SlurmApplyFailedError("x", None), SideResult.ROLLED_BACK),
        ([("planned", PLANNED), ("rolled_back", {})], None, SideResult.ROLLED_BACK),
        ([("planned", PLANNED), ("resumed", {}), ("gave_up", {})], None, SideResult.ROLLED_BACK),
        (
            [("planned", PLANNED), ("partitions_set", {}), ("resumed", {}), ("verified", {})],
            None,
            SideResult.APPLIED,
        ),
    ],
)
def test_slurm_recovery_from_recorded_steps(
    recorded: list[tuple[str, Mapping[str, Any]]], error: Exception | None, result: SideResult
) -> None:
    assert slurm_side(ScriptedSlurm(error=error)).recover("p1", SLURM, recorded, Sink()) is result


def test_slurm_recovery_that_fails_is_a_failure() -> None:
    adapter = ScriptedSlurm(error=CommandFailedError("sinfo: exit 1"))
    with pytest.raises(SideFailedError, match="recovery failed") as caught:
        slurm_side(adapter).recover("p1", SLURM, [("planned", PLANNED)], Sink())
    assert not caught.value.undone
