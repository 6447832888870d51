"""The dry run: what `ibpool apply ID --yes` would do, from the live state, changing nothing.

Reads only: no state transition, no step record, no file written (the store is opened without creating it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proposals.approval import blast_radius_check
from proposals.approval_config import BlastRadius
from proposals.states import APPLIED, APPROVED
from proposals.store import Store
from proposals.timestamps import format_rfc3339
from scheduler_hooks.apply.sides import AFTER, BEFORE, Side, group_changes, stale_reasons, validation_problems
from scheduler_hooks.errors import HookError

UNKNOWN = "unknown"


@dataclass(frozen=True)
class TargetPlan:
    """One target: the proposal's before and after, the live value, and which of them it matches."""

    target: str
    side: str
    before: str
    live: str | None
    after: str
    status: str  # before | after | stale | unknown


@dataclass(frozen=True)
class Plan:
    """Everything the dry run found."""

    proposal_id: str
    kind: str
    state: str
    proposer: str
    expires_at: str
    targets: tuple[TargetPlan, ...]
    actions: tuple[tuple[str, tuple[str, ...]], ...]
    refusals: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def would_apply(self) -> bool:
        """True when `--yes` would not be refused."""
        return not self.refusals

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "id": self.proposal_id,
            "dry_run": True,
            "kind": self.kind,
            "state": self.state,
            "proposer": self.proposer,
            "expires_at": self.expires_at,
            "targets": [vars(t) for t in self.targets],
            "actions": {side: list(lines) for side, lines in self.actions},
            "refusals": list(self.refusals),
            "notes": list(self.notes),
            "would_apply": self.would_apply,
        }


def make_plan(store: Store, sides: Sequence[Side], limits: BlastRadius, proposal_id: str) -> Plan:
    """Read the live state and every rule that `--yes` checks; change nothing."""
    stored = store.get(proposal_id)
    proposal = stored.proposal
    refusals: list[str] = []
    notes = [
        f"{s.id[:12]} is still applying (interrupted): --yes or --recover finishes it"
        for s in store.in_flight()
    ]
    if stored.state == APPLIED:
        notes.append("already applied: --yes would change nothing")
    elif stored.state != APPROVED:
        refusals.append(f"it is {stored.state}; only an approved proposal is applied")
    elif store.now() >= proposal.expires_at:
        refusals.append(f"it expired at {format_rfc3339(proposal.expires_at)}")
    groups = group_changes(sides, proposal.changes)
    status: dict[str, str] = {}
    for side, changes in groups:
        try:
            status.update(side.status(changes))
        except HookError as exc:
            refusals.append(f"{side.name}: cannot read the live state: {exc}")
    refusals += stale_reasons(groups, status)
    targets = [
        TargetPlan(
            c.target, side.name, c.before, _read(side, c.target), c.after, status.get(c.target, UNKNOWN)
        )
        for side, changes in groups
        for c in changes
    ]
    pending = [
        (side, tuple(c for c in changes if status.get(c.target) == BEFORE)) for side, changes in groups
    ]
    pending = [(side, changes) for side, changes in pending if changes]
    if status and all(value == AFTER for value in status.values()) and stored.state == APPROVED:
        notes.append("every target already shows after: --yes marks it applied without touching anything")
    elif stored.state != APPLIED:
        refusals += [f"blast radius: {p}" for p in blast_radius_check(store, stored, limits)]
        if len(status) == len(proposal.changes):  # every side could be read
            refusals += validation_problems(groups)
    reclaim = proposal.reclaim_nodes
    actions = tuple((side.name, tuple(_describe(side, changes, reclaim))) for side, changes in pending)
    return Plan(
        stored.id,
        proposal.kind,
        stored.state,
        stored.proposer,
        format_rfc3339(proposal.expires_at),
        tuple(targets),
        actions if stored.state != APPLIED else (),
        tuple(refusals),
        tuple(notes),
    )


def _read(side: Side, target: str) -> str | None:
    try:
        return side.read(target)
    except HookError:
        return None


def _describe(side: Side, changes: Sequence[Any], reclaim: Sequence[str]) -> list[str]:
    try:
        return side.describe(changes, reclaim)
    except HookError as exc:
        return [f"(cannot describe: {exc})"]


def render(plan: Plan) -> str:
    """The plan as text for a person."""
    lines = [
        f"DRY RUN (nothing changed; add --yes to apply): proposal {plan.proposal_id}",
        f"  kind {plan.kind}, state {plan.state}, proposed by {plan.proposer}, expires {plan.expires_at}",
        "  targets:",
    ]
    for t in plan.targets:
        live = "(unreadable)" if t.live is None else repr(t.live)
        lines.append(f"    {t.target} [{t.side}] live matches {t.status}")
        lines += [f"      before {t.before!r}", f"      live   {live}", f"      after  {t.after!r}"]
    for side, actions in plan.actions:
        lines.append(f"  {side} would:")
        lines += [f"    - {action}" for action in actions]
    lines += [f"  note: {note}" for note in plan.notes]
    if plan.refusals:
        lines.append("  --yes would be REFUSED:")
        lines += [f"    - {reason}" for reason in plan.refusals]
    else:
        lines.append("  --yes would apply it" if plan.state == APPROVED else "  --yes would change nothing")
    return "\n".join(lines)
