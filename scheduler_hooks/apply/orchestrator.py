"""Apply one approved proposal across its sides, verified, audited, rolled back on failure, recoverable.

apply: recover interrupted applies -> state rules (approved, not expired) -> live state (stale: refused and
audited; all at `after`: applying -> applied, nothing touched) -> blast radius -> validation by every side
-> `applying` -> each side applies (every adapter step recorded) -> `applied`; on a failure `failed`, the
sides that changed are rolled back, then `rolled_back` (or `failed` stays, with the reason audited).
Everything is driven from the step records, so recovery after a crash is the same code resuming.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proposals.approval import blast_radius_check
from proposals.approval_config import BlastRadius
from proposals.errors import RefusedError
from proposals.model import Change
from proposals.records import StoredProposal
from proposals.states import APPLIED, APPLYING, APPROVED, EXPIRED, FAILED, ROLLED_BACK
from proposals.store import Store
from proposals.timestamps import format_rfc3339
from scheduler_hooks.apply import progress as steps
from scheduler_hooks.apply.progress import Progress, encode, parse
from scheduler_hooks.apply.sides import (
    AFTER,
    Group,
    Recorded,
    Side,
    SideFailedError,
    SideResult,
    StepSink,
    UnconfiguredTargetsError,
    group_changes,
    live_status,
    stale_reasons,
    validation_problems,
)
from scheduler_hooks.errors import HookError

log = logging.getLogger(__name__)

ALREADY_APPLIED = "already_applied"
IN_EFFECT = "in_effect"
REFUSED = "refused"
EXIT_CODES = {APPLIED: 0, ALREADY_APPLIED: 0, IN_EFFECT: 0, REFUSED: 1, ROLLED_BACK: 3, FAILED: 4}
LOCK_FILE = "apply.lock"


class ApplyBusyError(HookError):
    """Another `ibpool apply` holds the state directory's lock."""


@dataclass(frozen=True)
class Outcome:
    """What one apply (or recovery) did with one proposal."""

    proposal_id: str
    result: str  # applied | already_applied | in_effect | refused | rolled_back | failed
    message: str
    reasons: tuple[str, ...] = ()
    recovered: bool = False

    @property
    def exit_code(self) -> int:
        """0 done, 1 refused (nothing changed), 3 failed and rolled back, 4 failed and not rolled back."""
        return EXIT_CODES[self.result]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "id": self.proposal_id,
            "result": self.result,
            "message": self.message,
            "reasons": list(self.reasons),
            "recovered": self.recovered,
        }


class Orchestrator:
    """Applies proposals from `store` through `sides`; one at a time per `state_dir`."""

    def __init__(
        self, store: Store, sides: Sequence[Side], *, limits: BlastRadius, who: str, state_dir: Path
    ) -> None:
        self.store = store
        self.sides = list(sides)
        self.limits = limits
        self.who = who
        self.state_dir = state_dir

    # --- entry points ----------------------------------------------------------------------------

    def apply(self, proposal_id: str) -> tuple[Outcome, list[Outcome]]:
        """Recover interrupted applies, then apply one proposal: (its outcome, the recoveries)."""
        with self._locked():
            recovered = self._recover_all(None)
            mine = next((o for o in recovered if o.proposal_id == proposal_id), None)
            if mine is not None:
                return mine, [o for o in recovered if o is not mine]
            stuck = [s.id[:12] for s in self.store.in_flight()]
            if stuck:
                why = f"interrupted apply of {', '.join(stuck)} could not be recovered; see --recover"
                return self._refused(proposal_id, [why]), recovered
            return self._apply(self.store.get(proposal_id)), recovered

    def recover(self, proposal_id: str | None = None) -> list[Outcome]:
        """Complete or roll back every interrupted apply (or only `proposal_id`'s)."""
        with self._locked():
            return self._recover_all(proposal_id)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ApplyBusyError(f"another ibpool apply holds {self.state_dir / LOCK_FILE}") from None
            yield
        finally:
            os.close(fd)

    # --- checks before acting --------------------------------------------------------------------

    def _apply(self, stored: StoredProposal) -> Outcome:
        pid = stored.id
        if stored.state == APPLIED:
            return Outcome(pid, ALREADY_APPLIED, "already applied; nothing changed")
        if stored.state != APPROVED:
            return self._refused(pid, [f"it is {stored.state}; only an approved proposal is applied"])
        if self.store.now() >= stored.proposal.expires_at:
            self.store.transition(pid, EXPIRED, self.who, "past expires_at when apply was asked")
            expired = format_rfc3339(stored.proposal.expires_at)
            return self._refused(pid, [f"it expired at {expired} (now marked expired)"])
        groups = group_changes(self.sides, stored.proposal.changes)
        try:
            status = live_status(groups)
        except HookError as exc:
            return self._refuse(stored, [f"cannot read the live state: {exc}"])
        stale = stale_reasons(groups, status)
        if stale:
            return self._refuse(stored, stale)
        if all(value == AFTER for value in status.values()):
            try:
                self.store.transition(pid, APPLYING, self.who, "every target already shows after")
            except RefusedError as exc:  # expired meanwhile
                return self._refused(pid, exc.reasons)
            self._step(pid, steps.IN_EFFECT, {"targets": sorted(status)})
            self.store.transition(pid, APPLIED, self.who, "already in effect; nothing touched")
            return Outcome(
                pid, IN_EFFECT, "every target already showed after; marked applied, nothing touched"
            )
        problems = [f"blast radius: {p}" for p in blast_radius_check(self.store, stored, self.limits)]
        problems += validation_problems(groups)
        if problems:
            return self._refuse(stored, problems)
        try:
            self.store.transition(pid, APPLYING, self.who, "apply started")
        except RefusedError as exc:
            return self._refused(pid, exc.reasons)
        self._step(pid, steps.START, {"who": self.who, "sides": [side.name for side, _ in groups]})
        return self._drive(self.store.get(pid), recovering=False)

    def _refuse(self, stored: StoredProposal, reasons: list[str]) -> Outcome:
        """Refuse `applying`, recorded in the audit log with every reason; nothing changes."""

        def guard(_: StoredProposal) -> None:
            raise RefusedError("; ".join(reasons), reasons)

        try:
            self.store.transition(stored.id, APPLYING, self.who, "apply", guard)
        except RefusedError as exc:
            return self._refused(stored.id, exc.reasons)
        raise AssertionError("the guard always refuses")  # pragma: no cover

    @staticmethod
    def _refused(pid: str, reasons: Sequence[str]) -> Outcome:
        return Outcome(pid, REFUSED, "refused: " + "; ".join(reasons), tuple(reasons))

    # --- acting, from wherever the steps say it stands -------------------------------------------

    def _drive(self, stored: StoredProposal, recovering: bool) -> Outcome:
        pid = stored.id
        groups = group_changes(self.sides, stored.proposal.changes)
        progress = parse(self.store.steps(pid))
        reason = progress.rollback_reason or progress.failure or "interrupted"
        if stored.state == APPLYING:
            failure = self._forward(pid, groups, progress, recovering, stored.proposal.reclaim_nodes)
            if failure is None:
                final = parse(self.store.steps(pid))
                done = ", ".join(f"{side.name} {final.side(side.name).result}" for side, _ in groups)
                self.store.transition(pid, APPLIED, self.who, "applied and verified" + _recovered(recovering))
                return Outcome(pid, APPLIED, f"applied and verified ({done})", recovered=recovering)
            self.store.transition(pid, FAILED, self.who, failure)
            reason = failure
        return self._roll_back(pid, groups, reason, recovering)

    def _forward(
        self, pid: str, groups: Sequence[Group], progress: Progress, recovering: bool, reclaim: Sequence[str]
    ) -> str | None:
        """Bring every side to `after` (apply, or finish an interrupted apply); the failure, if any.
        `reclaim`: the proposal's nodes taken back by reclaim, passed to each side's apply."""
        for side, changes in groups:
            state = progress.side(side.name)
            if state.result == "failed":
                return state.error
            if state.result is not None:
                continue
            if state.interrupted:
                failure = self._recover_side(pid, side, changes, state.steps)
            elif recovering:
                failure = self._unstarted(pid, side, changes)
            else:
                self._step(pid, steps.BEGIN, {"side": side.name})
                try:
                    result = side.apply(pid, changes, self._sink(pid, side.name), reclaim)
                except SideFailedError as exc:
                    self._failed(pid, side, str(exc), exc.undone)
                    return str(exc)
                self._done(pid, side, result)
                failure = None
            if failure is not None:
                return failure
        return None

    def _recover_side(
        self, pid: str, side: Side, changes: Sequence[Change], recorded: Recorded
    ) -> str | None:
        try:
            result = side.recover(pid, changes, recorded, self._sink(pid, side.name))
        except SideFailedError as exc:
            self._failed(pid, side, f"interrupted; {exc}", exc.undone)
            return f"interrupted; {exc}"
        if result in (SideResult.APPLIED, SideResult.NOOP):
            self._done(pid, side, result, recovered=True)
            return None
        how = "recovery rolled it back" if result is SideResult.ROLLED_BACK else "nothing had changed"
        why = f"{side.name}: interrupted; {how}"
        self._failed(pid, side, why, undone=True)
        return why

    def _unstarted(self, pid: str, side: Side, changes: Sequence[Change]) -> str | None:
        """Recovery never starts a side; one that already shows `after` counts as done."""
        try:
            at_after = all(value == AFTER for value in side.status(changes).values())
        except HookError as exc:
            log.warning("%s: cannot read the live state: %s", side.name, exc)
            at_after = False
        if at_after:
            self._done(pid, side, SideResult.NOOP, recovered=True)
            return None
        why = f"{side.name}: interrupted before it began"
        self._failed(pid, side, why, undone=True)
        return why

    def _roll_back(self, pid: str, groups: Sequence[Group], reason: str, recovering: bool) -> Outcome:
        """Put back every side that changed, newest first; then `rolled_back`, or `failed` stays."""
        progress = parse(self.store.steps(pid))
        if progress.rollback_ok is False:
            earlier = tuple(progress.rollback_errors)
            return Outcome(pid, FAILED, f"failed ({reason}); rollback failed earlier", earlier, recovering)
        if progress.rollback_ok is None:
            if progress.rollback_reason is None:
                self._step(pid, steps.ROLLBACK, {"reason": reason})
            errors: list[str] = []
            for side, changes in reversed(groups):
                state = progress.side(side.name)
                if not state.needs_undo:
                    continue
                self._step(pid, steps.UNDO, {"side": side.name})
                try:
                    side.rollback(pid, changes, state.steps, self._sink(pid, side.name))
                except SideFailedError as exc:
                    errors.append(str(exc))
                    self._step(pid, steps.UNDO_FAILED, {"side": side.name, "error": str(exc)})
                    continue
                self._step(pid, steps.UNDONE, {"side": side.name})
            self._step(pid, steps.ROLLBACK_END, {"ok": not errors, "errors": errors})
            if errors:
                self._keep_failed(pid, errors)
                return Outcome(pid, FAILED, f"failed ({reason}); rollback failed", tuple(errors), recovering)
        self.store.transition(
            pid, ROLLED_BACK, self.who, f"rolled back after: {reason}" + _recovered(recovering)
        )
        return Outcome(pid, ROLLED_BACK, f"failed and rolled back: {reason}", (reason,), recovering)

    def _keep_failed(self, pid: str, errors: list[str]) -> None:
        """Record in the audit log why the proposal stays `failed` (a refused `rolled_back`)."""
        reasons = [f"rollback failed: {e}" for e in errors]

        def guard(_: StoredProposal) -> None:
            raise RefusedError("; ".join(reasons), reasons)

        try:
            self.store.transition(pid, ROLLED_BACK, self.who, "operator needed", guard)
        except RefusedError:
            log.error("proposal %s stays failed: %s", pid[:12], "; ".join(errors))

    # --- recovery --------------------------------------------------------------------------------

    def _recover_all(self, only: str | None) -> list[Outcome]:
        outcomes: list[Outcome] = []
        candidates = self.store.in_flight() + [
            s for s in self.store.list_proposals(FAILED) if _rollback_unfinished(self.store, s.id)
        ]
        for stored in candidates:
            if only is not None and stored.id != only:
                continue
            log.warning("proposal %s was left %s: recovering", stored.id[:12], stored.state)
            try:
                outcomes.append(self._drive(stored, recovering=True))
            except UnconfiguredTargetsError as exc:
                why = f"cannot recover it with this config: {exc}"
                outcomes.append(Outcome(stored.id, FAILED, why, (why,), recovered=True))
        return outcomes

    # --- records ---------------------------------------------------------------------------------

    def _step(self, pid: str, name: str, detail: Mapping[str, Any]) -> None:
        self.store.record_step(pid, name, encode(detail))

    def _sink(self, pid: str, side: str) -> StepSink:
        def sink(step: str, detail: Mapping[str, Any]) -> None:
            self.store.record_step(pid, f"{side}.{step}", encode(detail))

        return sink

    def _done(self, pid: str, side: Side, result: SideResult, recovered: bool = False) -> None:
        detail: dict[str, Any] = {"side": side.name, "result": result.value}
        if recovered:
            detail["recovered"] = True
        self._step(pid, steps.DONE, detail)

    def _failed(self, pid: str, side: Side, error: str, undone: bool) -> None:
        self._step(pid, steps.FAILED, {"side": side.name, "error": error, "undone": undone})


def _recovered(recovering: bool) -> str:
    return " (recovered after an interrupted apply)" if recovering else ""


def _rollback_unfinished(store: Store, pid: str) -> bool:
    """A `failed` proposal whose rollback did not end (a crash), or ended without the last transition."""
    state = parse(store.steps(pid))
    return state.started and state.rollback_ok is not False
