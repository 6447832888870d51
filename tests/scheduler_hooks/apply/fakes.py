"""Fake sides over an in-memory "live system", a store that dies mid-apply, and proposal builders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from proposals import approval
from proposals.approval_config import BlastRadius
from proposals.model import Change, Proposal, from_dict
from proposals.records import StoredProposal
from proposals.store import Guard, Store
from scheduler_hooks.apply.orchestrator import Orchestrator
from scheduler_hooks.apply.sides import (
    AFTER,
    BEFORE,
    STALE,
    Recorded,
    Side,
    SideFailedError,
    SideResult,
    StepSink,
)
from tests.proposals.factory import FakeClock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
WEIGHTS = ("opensm.vlarb_low", "1:64,2:32", "1:80,2:32")
MOVE_OSM = [
    ("opensm.partition.a.members", "0x0000000000000001,0x0000000000000002", "0x0000000000000001"),
    ("opensm.partition.b.members", "0x0000000000000003", "0x0000000000000002,0x0000000000000003"),
]
MOVE_SLURM = [("slurm.partition.a.nodes", "n1,n2", "n1"), ("slurm.partition.b.nodes", "n3", "n2,n3")]


class Crash(BaseException):
    """Stands for kill -9: nothing after it runs (BaseException, so no handler swallows it)."""


class FakeSide:
    """A side over `live` (target -> value): steps `planned`, `set` (one per change), `verified`.

    `fail_at`: the 1-based change whose `set` fails (after it is written when `half` is true); the side
    undoes itself unless `no_undo`. `fail_rollback`: rollback raises. A crash after any step leaves
    exactly what the steps say was done.
    """

    def __init__(self, name: str, live: dict[str, str]) -> None:
        self.name = name
        self.live = live
        self.fail_at: int | None = None
        self.half = True
        self.no_undo = False
        self.fail_rollback = False
        self.fail_read = False
        self.problems: list[str] = []
        self.calls: list[str] = []
        self.reclaims: list[tuple[str, ...]] = []  # the reclaim each apply was given

    def handles(self, target: str) -> bool:
        return target.startswith(f"{self.name}.")

    def read(self, target: str) -> str:
        if self.fail_read:
            raise SideFailedError(f"{self.name}: cannot read", undone=True)
        return self.live[target]

    def status(self, changes: Sequence[Change]) -> dict[str, str]:
        values = {c.target: self.read(c.target) for c in changes}
        return {
            c.target: AFTER
            if values[c.target] == c.after
            else BEFORE
            if values[c.target] == c.before
            else STALE
            for c in changes
        }

    def validate(self, changes: Sequence[Change]) -> list[str]:
        return list(self.problems)

    def describe(self, changes: Sequence[Change], reclaim: Sequence[str] = ()) -> list[str]:
        lines = [f"set {c.target} to {c.after}" for c in changes]
        return lines + ([f"reclaim {','.join(reclaim)}"] if reclaim else [])

    def apply(
        self, proposal_id: str, changes: Sequence[Change], sink: StepSink, reclaim: Sequence[str] = ()
    ) -> SideResult:
        self.calls.append("apply")
        self.reclaims.append(tuple(reclaim))
        if all(v == AFTER for v in self.status(changes).values()):
            return SideResult.NOOP
        sink("planned", {"targets": [c.target for c in changes]})
        for number, change in enumerate(changes, 1):
            if number == self.fail_at:
                if self.half:
                    self.live[change.target] = "half-written"
                if self.no_undo:
                    raise SideFailedError(
                        f"{self.name}: set {change.target} failed; undo failed", undone=False
                    )
                self._restore(changes)
                sink("rolled_back", {})
                raise SideFailedError(f"{self.name}: set {change.target} failed; undone", undone=True)
            self.live[change.target] = change.after
            sink("set", {"target": change.target})
        sink("verified", {})
        return SideResult.APPLIED

    def rollback(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> None:
        self.calls.append("rollback")
        names = [name for name, _ in recorded]
        if "planned" not in names or "rolled_back" in names:
            return
        if self.fail_rollback:
            raise SideFailedError(f"{self.name}: rollback failed", undone=False)
        self._restore(changes)
        sink("rolled_back", {})

    def recover(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> SideResult:
        self.calls.append("recover")
        names = [name for name, _ in recorded]
        if "rolled_back" in names:
            return SideResult.ROLLED_BACK
        if "verified" in names:
            return SideResult.APPLIED
        if "planned" not in names:
            at_after = all(v == AFTER for v in self.status(changes).values())
            return SideResult.NOOP if at_after else SideResult.UNTOUCHED
        if names.count("set") == len(changes):  # everything written: roll forward
            sink("verified", {"recovered": True})
            return SideResult.APPLIED
        self._restore(changes)
        sink("rolled_back", {})
        return SideResult.ROLLED_BACK

    def close(self) -> None:
        self.calls.append("close")

    def _restore(self, changes: Sequence[Change]) -> None:
        for change in changes:
            self.live[change.target] = change.before


class CrashingStore(Store):
    """A store whose process dies (Crash) right after its `crash_after`-th durable write of an apply."""

    def __init__(self, path: Path, clock: FakeClock, crash_after: int | None = None) -> None:
        super().__init__(path, clock=clock)
        self.crash_after = crash_after
        self.writes: list[str] = []

    def _wrote(self, what: str) -> None:
        self.writes.append(what)
        if self.crash_after is not None and len(self.writes) == self.crash_after:
            raise Crash(what)

    def record_step(self, proposal_id: str, step: str, detail: str = "") -> int:
        seq = super().record_step(proposal_id, step, detail)
        self._wrote(step)
        return seq

    def transition(
        self,
        proposal_id: str,
        to_state: str,
        who: str,
        detail: str = "",
        guard: Guard | None = None,
        *,
        actor: str | None = None,
    ) -> StoredProposal:
        stored = super().transition(proposal_id, to_state, who, detail, guard, actor=actor)
        self._wrote(f"-> {to_state}")
        return stored


def doc(changes: Sequence[tuple[str, str, str]], kind: str, hours: float = 2) -> dict[str, Any]:
    """A proposal document with these (target, before, after) changes, created at T0."""
    return {
        "kind": kind,
        "changes": [{"target": t, "before": b, "after": a} for t, b, a in changes],
        "evidence": [],
        "expected_effect": "test",
        "created_at": "2024-05-01T12:00:00Z",
        "expires_at": (T0 + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "policy": "test",
    }


def proposal(
    changes: Sequence[tuple[str, str, str]], kind: str = "move_nodes", hours: float = 2, reclaim: str = ""
) -> Proposal:
    """A Proposal with these (target, before, after) changes (and these nodes taken back by reclaim)."""
    return from_dict(dict(doc(changes, kind, hours), reclaim=reclaim))


def approved(store: Store, item: Proposal) -> str:
    """Submit as alice, approve as bob; the id."""
    stored, _ = store.submit(item, "alice", actor="unix:alice")
    approval.approve(store, stored.id, "bob", actor="unix:bob")
    return stored.id


def live_before(changes: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    """A live system showing every `before`."""
    return {t: b for t, b, _ in changes}


def orchestrator(
    store: Store, sides: Sequence[Side], tmp: Path, limits: BlastRadius | None = None
) -> Orchestrator:
    """An orchestrator applying as carol, its lock in `tmp`."""
    return Orchestrator(store, sides, limits=limits or BlastRadius(), who="carol", state_dir=tmp / "state")


def transitions(store: Store, pid: str) -> list[tuple[str | None, str, str]]:
    """(from, to, result) of every audit entry of a proposal."""
    return [(e.from_state, e.to_state, e.result) for e in store.audit(pid)]


def step_names(store: Store, pid: str) -> list[str]:
    """The step records of a proposal, by name."""
    return [s.step for s in store.steps(pid)]


def values(live: Mapping[str, str], changes: Sequence[tuple[str, str, str]], which: int) -> bool:
    """Whether every target shows its before (which=1) or after (which=2)."""
    return all(live[c[0]] == c[which] for c in changes)
