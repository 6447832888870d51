"""The step records of one apply, and how far it got: what the orchestrator resumes from after a crash.

Step names in the store: the orchestrator's own are `apply.<what>` (detail names the side), each adapter
step is `<side>.<step>` (`opensm.signalled`, `slurm.partitions_set`) with the adapter's detail as JSON.

    apply.start {who, sides}         apply.in_effect {}          (every target already showed `after`)
    apply.begin {side}  <side>.*     apply.done {side, result}   apply.failed {side, error, undone}
    apply.rollback {reason}          apply.undo {side}           apply.undone {side}
    apply.undo_failed {side, error}  apply.rollback_end {ok, errors}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proposals.records import StepRecord

PREFIX = "apply."
START = "apply.start"
IN_EFFECT = "apply.in_effect"
BEGIN = "apply.begin"
DONE = "apply.done"
FAILED = "apply.failed"
ROLLBACK = "apply.rollback"
UNDO = "apply.undo"
UNDONE = "apply.undone"
UNDO_FAILED = "apply.undo_failed"
ROLLBACK_END = "apply.rollback_end"


def encode(detail: Mapping[str, Any]) -> str:
    """Step detail as stored: JSON, sorted keys (anything unusual as its text)."""
    return json.dumps(dict(detail), sort_keys=True, default=str)


def decode(text: str) -> dict[str, Any]:
    """Stored detail back to a mapping (empty when it is not a JSON object)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class SideProgress:
    """One side of one apply, as its steps tell it."""

    begun: bool = False
    result: str | None = None  # applied | noop | failed
    undone: bool = False  # a failed side that is back at `before`
    error: str = ""
    undo: str | None = None  # begun | undone | failed
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        """Begun, with no outcome recorded."""
        return self.begun and self.result is None

    @property
    def needs_undo(self) -> bool:
        """Whether a rollback must (still) put this side back."""
        if self.undo == "undone":
            return False
        if self.result == "applied":
            return True
        return self.begun and self.result in (None, "failed") and not self.undone


@dataclass
class Progress:
    """How far one proposal's apply got."""

    started: bool = False
    in_effect: bool = False
    failure: str | None = None
    rollback_reason: str | None = None
    rollback_ok: bool | None = None
    rollback_errors: list[str] = field(default_factory=list)
    sides: dict[str, SideProgress] = field(default_factory=dict)

    def side(self, name: str) -> SideProgress:
        """The progress of one side (empty when it never began)."""
        return self.sides.setdefault(name, SideProgress())


def parse(steps: Sequence[StepRecord]) -> Progress:
    """Fold the step records of one proposal, in order."""
    progress = Progress()
    for record in steps:
        detail = decode(record.detail)
        name = record.step
        if not name.startswith(PREFIX):
            owner, _, step = name.partition(".")
            progress.side(owner).steps.append((step, detail))
            continue
        side = progress.side(str(detail.get("side", "")))
        if name == START:
            progress.started = True
        elif name == IN_EFFECT:
            progress.in_effect = True
        elif name == BEGIN:
            side.begun = True
        elif name == DONE:
            side.result = str(detail.get("result", "applied"))
        elif name == FAILED:
            side.result, side.error, side.undone = (
                "failed",
                str(detail.get("error", "")),
                bool(detail.get("undone")),
            )
            progress.failure = progress.failure or side.error
        elif name == ROLLBACK:
            progress.rollback_reason = str(detail.get("reason", ""))
        elif name == UNDO:
            side.undo = "begun"
        elif name == UNDONE:
            side.undo = "undone"
        elif name == UNDO_FAILED:
            side.undo = "failed"
        elif name == ROLLBACK_END:
            progress.rollback_ok = bool(detail.get("ok"))
            progress.rollback_errors = [str(e) for e in detail.get("errors", [])]
    progress.sides.pop("", None)
    return progress
