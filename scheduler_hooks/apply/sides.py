"""What the orchestrator needs from each system it changes (a "side"): OpenSM or Slurm.

A side is a thin wrapper around one adapter. It never touches the store: every adapter step goes to the
`StepSink` it is given, and everything it needs to roll back or recover is rebuilt from those steps
(`recorded`: this side's steps of one proposal, in order, as the sink received them). `reclaim`: the nodes
the proposal takes back by reclaim (`Proposal.reclaim_nodes`); a side without jobs to requeue ignores it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

from proposals.model import Change
from scheduler_hooks.errors import HookError

StepSink = Callable[[str, Mapping[str, Any]], None]
"""sink(step, detail): one durable adapter step, with JSON-ready detail."""

Recorded = Sequence[tuple[str, Mapping[str, Any]]]

BEFORE = "before"
AFTER = "after"
STALE = "stale"


class SideResult(StrEnum):
    """How an apply or a recovery left one side."""

    APPLIED = "applied"  # changed to `after`, verified
    NOOP = "noop"  # already at `after`; nothing touched
    ROLLED_BACK = "rolled_back"  # put back (or left) at `before`
    UNTOUCHED = "untouched"  # nothing had been done


class SideFailedError(HookError):
    """A side could not apply, roll back or recover; `undone` says whether it is back at `before`."""

    def __init__(self, message: str, undone: bool) -> None:
        super().__init__(message)
        self.undone = undone


class Side(Protocol):
    """One system the orchestrator changes."""

    name: str

    def handles(self, target: str) -> bool:
        """Whether `target` belongs to this side."""
        ...

    def read(self, target: str) -> str:
        """The live value (HookError when it cannot be read)."""
        ...

    def status(self, changes: Sequence[Change]) -> dict[str, str]:
        """Per target: `before`, `after` (already in effect) or `stale` (neither)."""
        ...

    def validate(self, changes: Sequence[Change]) -> list[str]:
        """Every problem with `changes` (empty: they may be applied)."""
        ...

    def describe(self, changes: Sequence[Change], reclaim: Sequence[str] = ()) -> list[str]:
        """What applying would run, one line each (for the dry run)."""
        ...

    def apply(
        self, proposal_id: str, changes: Sequence[Change], sink: StepSink, reclaim: Sequence[str] = ()
    ) -> SideResult:
        """Apply and verify: APPLIED or NOOP; SideFailedError (undone or not) otherwise."""
        ...

    def rollback(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> None:
        """Put back what the recorded apply changed; SideFailedError when that fails."""
        ...

    def recover(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> SideResult:
        """Finish or undo an apply interrupted after `recorded`; SideFailedError when neither works."""
        ...

    def close(self) -> None:
        """Release what the adapter holds."""
        ...


class UnconfiguredTargetsError(HookError):
    """Some targets belong to no configured side; `targets` lists them."""

    def __init__(self, targets: list[str]) -> None:
        super().__init__(f"no configured side handles {', '.join(targets)}")
        self.targets = targets


Group = tuple[Side, tuple[Change, ...]]


def group_changes(sides: Sequence[Side], changes: Sequence[Change]) -> list[Group]:
    """Changes per side, sides in the order of their first listed change; UnconfiguredTargetsError."""
    order: list[Side] = []
    by_side: dict[str, list[Change]] = {}
    missing: list[str] = []
    for change in changes:
        side = next((s for s in sides if s.handles(change.target)), None)
        if side is None:
            missing.append(change.target)
            continue
        if side.name not in by_side:
            order.append(side)
            by_side[side.name] = []
        by_side[side.name].append(change)
    if missing:
        raise UnconfiguredTargetsError(missing)
    return [(side, tuple(by_side[side.name])) for side in order]


def live_status(groups: Sequence[Group]) -> dict[str, str]:
    """Per target: before, after or stale, across every side (HookError when a side cannot be read)."""
    status: dict[str, str] = {}
    for side, changes in groups:
        status.update(side.status(changes))
    return status


def stale_reasons(groups: Sequence[Group], status: Mapping[str, str]) -> list[str]:
    """One line per stale target, with the live value where it can be read."""
    reasons: list[str] = []
    for side, changes in groups:
        for change in changes:
            if status.get(change.target) != STALE:
                continue
            try:
                live = repr(side.read(change.target))
            except HookError as exc:
                live = f"unreadable ({exc})"
            reasons.append(
                f"stale: {change.target} is {live} live, neither before {change.before!r} "
                f"nor after {change.after!r}"
            )
    return reasons


def validation_problems(groups: Sequence[Group]) -> list[str]:
    """Every side's validation problems, at once (a side that cannot be read says so)."""
    problems: list[str] = []
    for side, changes in groups:
        try:
            problems += side.validate(changes)
        except HookError as exc:
            problems.append(f"{side.name}: cannot validate: {exc}")
    return problems
