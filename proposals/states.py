"""The proposal lifecycle: states and the transitions allowed between them (docs/proposals.md).

    pending  -> approved | rejected | expired
    approved -> applying | expired
    applying -> applied | failed
    failed   -> rolled_back

An abandoned apply records `failed` (with the reason) before `rolled_back`: never `applying -> rolled_back`.
"""

from __future__ import annotations

from collections.abc import Mapping

from proposals.errors import IllegalTransitionError

PENDING = "pending"
APPROVED = "approved"
REJECTED = "rejected"
EXPIRED = "expired"
APPLYING = "applying"
APPLIED = "applied"
FAILED = "failed"
ROLLED_BACK = "rolled_back"

STATES: tuple[str, ...] = (PENDING, APPROVED, REJECTED, EXPIRED, APPLYING, APPLIED, FAILED, ROLLED_BACK)

TRANSITIONS: Mapping[str, frozenset[str]] = {
    PENDING: frozenset({APPROVED, REJECTED, EXPIRED}),
    APPROVED: frozenset({APPLYING, EXPIRED}),
    APPLYING: frozenset({APPLIED, FAILED}),
    FAILED: frozenset({ROLLED_BACK}),
    REJECTED: frozenset(),
    EXPIRED: frozenset(),
    APPLIED: frozenset(),
    ROLLED_BACK: frozenset(),
}

TERMINAL: frozenset[str] = frozenset(state for state, nexts in TRANSITIONS.items() if not nexts)
EXPIRABLE: frozenset[str] = frozenset(state for state, nexts in TRANSITIONS.items() if EXPIRED in nexts)
IN_FLIGHT: frozenset[str] = frozenset({APPLYING})


def check_transition(proposal_id: str, current: str, target: str) -> None:
    """Raise IllegalTransitionError unless `current -> target` is allowed."""
    if target not in TRANSITIONS:
        raise IllegalTransitionError(f"unknown state {target!r}; states are {', '.join(STATES)}")
    allowed = TRANSITIONS[current]
    if target not in allowed:
        options = ", ".join(sorted(allowed)) if allowed else "none: it is final"
        raise IllegalTransitionError(
            f"proposal {proposal_id[:12]} is {current}; cannot move it to {target} (allowed: {options})"
        )
