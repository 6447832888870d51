"""Moves nodes between Slurm partitions: drain, wait, set, resume, verify, persist.

Work is not killed unless configured: jobs still running on a leaving node at the drain deadline make the
move give up (`on_drain_deadline: give_up`), or are requeued (`requeue`: `scontrol requeue`, an urgent
reclaim that pays in lost work) and the move goes on once they have left. A failure part-way is undone
(partitions set back to their full previous lists, our nodes resumed, slurm.conf restored) and raised as
SlurmApplyFailedError with the record; every step is reported as it completes so that `recover` can
finish or undo an apply that was interrupted.

A proposal's reclaim (nodes taken back by requeueing their jobs) is honoured only with `reclaims: allow`:
the jobs on those nodes are requeued as soon as they are drained (deadline 0, the same requeue), the other
leaving nodes wait as configured. With `as_drain` they drain like the rest; the `planned` step records
which (`reclaim`, `reclaims`, `requeue_at_once`) and a warning says so.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from proposals.targets import sorted_nodes
from scheduler_hooks.errors import (
    ChangeRejectedError,
    CommandFailedError,
    HookError,
    LiveStateError,
    RecoveryFailedError,
    SlurmApplyFailedError,
    SlurmConfError,
    SlurmDrainDeadlineError,
    SlurmStaleChangeError,
)
from scheduler_hooks.slurm.commands import Runner, SlurmCommands
from scheduler_hooks.slurm.config import REQUEUE, SlurmConfig
from scheduler_hooks.slurm.live import SlurmLive
from scheduler_hooks.slurm.parse import NodeInfo
from scheduler_hooks.slurm.plan import ChangeLike, check_changes, node_value, partition_of, plan_changes
from scheduler_hooks.slurm.record import ApplyRecord, OnStep, Outcome, PartitionPlan, Step
from scheduler_hooks.slurm.slurmconf import SlurmConfFile, partition_nodes

log = logging.getLogger(__name__)

_PROPOSAL = re.compile(r"[A-Za-z0-9_.:-]{0,128}")  # fullmatch
REASON_PREFIX = "ibpool move"


class _DeadlinePassedError(HookError):
    def __init__(self, busy: Sequence[str], why: str = "") -> None:
        super().__init__(f"jobs still running on {','.join(busy)} at the deadline{why}")


class _Steps:
    """The record being built, reported to `on_step` as each step completes."""

    def __init__(self, record: ApplyRecord, on_step: OnStep | None) -> None:
        self.record = record
        self._on_step = on_step

    def report(self, step: Step, detail: Mapping[str, Any]) -> None:
        self.record = self.record.with_step(step, detail)
        log.info("proposal %s: %s %s", self.record.proposal or "-", step, dict(detail))
        if self._on_step is not None:
            self._on_step(str(step), detail)

    def end(self, outcome: Outcome, error: str = "") -> ApplyRecord:
        self.record = replace(self.record, outcome=outcome, error=error)
        return self.record


def _is_ours(reason: str, ours: str) -> bool:
    """scontrol prints a drain reason as `TEXT [user@time]`."""
    return reason == ours or reason.startswith(f"{ours} [")


class SlurmAdapter:
    """The Slurm side of the scheduler hooks; targets are `slurm.partition.<pool>.nodes`."""

    def __init__(
        self,
        config: SlurmConfig,
        runner: Runner | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.live = SlurmLive(runner or SlurmCommands(config))
        self.conf = SlurmConfFile(config.slurm_conf, config.backup_path)
        self._sleep = sleep
        self._clock = clock

    # --- reading ----------------------------------------------------------------------------------

    @staticmethod
    def handles(target: str) -> bool:
        """Whether `target` is one of this adapter's."""
        return partition_of(target) is not None

    def read(self, target: str) -> str:
        """The live value of a target: the partition's full node list as sinfo counts it."""
        partition = partition_of(target)
        if partition is None:
            raise ChangeRejectedError([f"{target}: not a slurm.partition.<pool>.nodes target"])
        partitions = self.live.partitions()
        if partition not in partitions:
            raise LiveStateError(f"{target}: no partition {partition} in Slurm")
        return node_value(partitions[partition])

    def validate(self, changes: Sequence[ChangeLike]) -> list[str]:
        """Every problem with `changes` (names, partitions, nodes, empty partitions, slurm.conf), at once."""
        return self._problems(changes, self.live.partitions(), self.live.nodes())

    def _problems(
        self,
        changes: Sequence[ChangeLike],
        partitions: Mapping[str, Sequence[str]],
        nodes: Mapping[str, NodeInfo],
    ) -> list[str]:
        problems = check_changes(changes, partitions, nodes, self.config.allow_empty_partitions)
        if self.config.persist:
            names = [name for change in changes if (name := partition_of(change.target))]
            try:
                problems += [f"slurm.conf: {problem}" for problem in self.conf.check(names)]
            except SlurmConfError as exc:
                problems.append(f"slurm.conf: {exc}")
        return problems

    def stale(self, changes: Sequence[ChangeLike]) -> list[str]:
        """Targets whose live value is neither `before` nor `after` (one already at `after` is not stale)."""
        try:
            return list(plan_changes(changes, self.live.partitions()).stale)
        except ValueError as exc:
            raise ChangeRejectedError([str(exc)]) from None

    # --- acting -----------------------------------------------------------------------------------

    def apply(
        self,
        changes: Sequence[ChangeLike],
        on_step: OnStep | None = None,
        proposal: str = "",
        reclaim: Collection[str] = (),
    ) -> ApplyRecord:
        """Carry out `changes`; a no-op when every partition already holds its `after`. `reclaim`: the
        nodes the proposal takes back by reclaim (requeued at once only with `reclaims: allow`).

        Raises ChangeRejectedError (invalid), SlurmStaleChangeError (live state moved on),
        SlurmDrainDeadlineError (jobs outlived the deadline; nodes resumed, nothing else changed) or
        SlurmApplyFailedError (undone; RecoveryFailedError if the undo failed too).
        """
        if not _PROPOSAL.fullmatch(proposal):
            raise ChangeRejectedError([f"proposal id {proposal!r}: letters, digits and _.:- only"])
        partitions, nodes = self.live.partitions(), self.live.nodes()
        problems = self._problems(changes, partitions, nodes)
        if problems:
            raise ChangeRejectedError(problems)
        plan = plan_changes(changes, partitions)
        if plan.stale:
            raise SlurmStaleChangeError(
                [f"{target}: live value no longer matches before" for target in plan.stale]
            )
        if not plan.plans:
            return ApplyRecord(proposal, outcome=Outcome.NOOP)
        steps = _Steps(ApplyRecord(proposal), on_step)
        steps.report(Step.PLANNED, self._planned(plan.plans, nodes, proposal, reclaim))
        try:
            self._drain_and_wait(steps)
            self._complete(steps)
        except _DeadlinePassedError as exc:
            self._give_up(steps, str(exc))
            raise SlurmDrainDeadlineError(
                f"proposal {proposal}: {exc}; nodes resumed", steps.record
            ) from None
        except HookError as exc:
            log.error("proposal %s failed: %s; rolling back", proposal or "-", exc)
            self._undo(steps, str(exc))
            raise SlurmApplyFailedError(f"proposal {proposal}: {exc}; rolled back", steps.record) from exc
        return steps.end(Outcome.APPLIED)

    def rollback(self, record: ApplyRecord, on_step: OnStep | None = None) -> ApplyRecord:
        """Undo an apply (finished or not): previous full lists, our nodes resumed, slurm.conf restored.

        Nodes are not drained again: a job keeps running when its node leaves the partition (22.05).
        """
        steps = _Steps(record, on_step)
        self._undo(steps, record.error)
        return steps.record

    def recover(self, record: ApplyRecord, on_step: OnStep | None = None) -> ApplyRecord:
        """Finish an interrupted apply: forward once its partitions were set, else back."""
        if record.outcome is not Outcome.PENDING or not record.plans:
            return record
        steps = _Steps(record, on_step)
        if not record.done(Step.PARTITIONS_SET):
            self._undo(steps, "interrupted before the partitions were set")
            return steps.record
        try:
            self._complete(steps)
        except HookError as exc:
            self._undo(steps, str(exc))
            raise SlurmApplyFailedError(
                f"recovering proposal {record.proposal}: {exc}; rolled back", steps.record
            ) from exc
        return steps.end(Outcome.APPLIED)

    # --- the steps --------------------------------------------------------------------------------

    def _planned(
        self,
        plans: Sequence[PartitionPlan],
        nodes: Mapping[str, NodeInfo],
        proposal: str,
        reclaim: Collection[str],
    ) -> dict[str, Any]:
        leaving = sorted_nodes(set().union(*(plan.leaving for plan in plans)))
        reclaimed = sorted_nodes(set(reclaim) & set(leaving))
        at_once = self.config.requeued_at_once(reclaimed)
        if reclaimed and not at_once:
            log.warning(
                "proposal %s reclaims %s: applied as a drain (slurm.reclaims: as_drain): deadline %g s, "
                "then %s",
                proposal or "-",
                ",".join(reclaimed),
                self.config.drain_deadline_seconds,
                self.config.on_drain_deadline,
            )
        return {
            "partitions": {p.partition: {"before": list(p.before), "after": list(p.after)} for p in plans},
            "leaving": leaving,
            # A node drained or down before we came is not ours to drain, nor to resume.
            "drain": [name for name in leaving if not (nodes[name].draining or nodes[name].down)],
            "reason": f"{REASON_PREFIX} {proposal}".strip(),
            "persist": self.config.persist,
            "reclaim": reclaimed,  # what the proposal asked
            "reclaims": self.config.reclaims,
            "requeue_at_once": at_once,  # what is done: empty when applied as a drain
        }

    def _drain_and_wait(self, steps: _Steps) -> None:
        planned = steps.record.detail(Step.PLANNED)
        to_drain, leaving = list(planned["drain"]), list(planned["leaving"])
        if to_drain:
            self.live.drain(to_drain, steps.record.reason)
        steps.report(Step.DRAINED, {"nodes": to_drain, "reason": steps.record.reason})
        start = self._clock()
        deadline = start + self.config.drain_deadline_seconds
        leave_by: dict[str, float] = {}  # node whose jobs were requeued -> when they must have left
        at_once = self.live.busy(list(planned.get("requeue_at_once", [])))
        if at_once:  # a reclaim: requeue now, whatever the deadline
            self._requeue(steps, at_once, start, "reclaim")
            leave_by |= dict.fromkeys(at_once, self._clock() + self.config.command_timeout_seconds)
        while busy := self.live.busy(leaving):
            now = self._clock()
            late = [name for name in busy if name in leave_by and now >= leave_by[name]]
            if late:
                raise _DeadlinePassedError(late, " (after requeueing their jobs)")
            waiting = [name for name in busy if name not in leave_by]
            if waiting and now >= deadline:
                if self.config.on_drain_deadline != REQUEUE:
                    raise _DeadlinePassedError(waiting)
                self._requeue(steps, waiting, start, "deadline")
                leave_by |= dict.fromkeys(waiting, self._clock() + self.config.command_timeout_seconds)
                continue
            self._sleep(self.config.poll_interval_seconds)
        steps.report(Step.JOBS_ENDED, {"nodes": leaving, "waited_seconds": round(self._clock() - start, 3)})

    def _requeue(self, steps: _Steps, busy: Sequence[str], start: float, why: str) -> None:
        """Requeue the jobs still running on `busy` (each on its own: one that cannot be requeued, e.g. an
        interactive job, makes the move give up with the ones already requeued reported); `why`: `reclaim`
        (asked by the proposal) or `deadline` (`on_drain_deadline: requeue`)."""
        jobs = self.live.running_jobs(busy)
        done: list[str] = []
        failed = ""
        for job in jobs:
            try:
                self.live.requeue(job)
            except CommandFailedError as exc:
                failed = f" (job {job} could not be requeued: {exc})"
                break
            done.append(job)
        waited = round(self._clock() - start, 3)
        steps.report(Step.REQUEUED, {"nodes": list(busy), "jobs": done, "waited_seconds": waited, "why": why})
        if failed:
            raise _DeadlinePassedError(busy, failed)

    def _complete(self, steps: _Steps) -> None:
        """From setting the partitions to persisting; each part is idempotent, so recovery can redo it."""
        plans = steps.record.plans
        self._set_partitions(plans, after=True)
        steps.report(Step.PARTITIONS_SET, {"partitions": {p.partition: list(p.after) for p in plans}})
        steps.report(Step.RESUMED, {"nodes": self._resume_ours(steps.record)})
        steps.report(Step.VERIFIED, {"partitions": self._verify(plans, after=True)})
        if steps.record.detail(Step.PLANNED).get("persist") and not steps.record.done(Step.PERSISTED):
            steps.report(Step.PERSISTED, self.conf.update({p.partition: p.after for p in plans}))

    def _give_up(self, steps: _Steps, why: str) -> None:
        steps.report(Step.RESUMED, {"nodes": self._resume_ours(steps.record)})
        steps.report(Step.GAVE_UP, {"why": why})
        steps.end(Outcome.GAVE_UP, why)

    def _undo(self, steps: _Steps, why: str) -> None:
        """Put back what the record's plans changed; try every part, then report or raise."""
        record, errors = steps.record, []
        plans = record.plans
        restored = "untouched"
        try:
            self._set_partitions(plans, after=False)
        except HookError as exc:
            errors.append(f"partitions: {exc}")
        try:
            restored = self._unpersist(record)
        except SlurmConfError as exc:
            errors.append(f"slurm.conf: {exc}")
        resumed: list[str] = []
        try:
            resumed = self._resume_ours(record)
        except HookError as exc:
            errors.append(f"resume: {exc}")
        live: dict[str, list[str]] = {}
        if not errors:
            try:
                live = self._verify(plans, after=False)
            except HookError as exc:
                errors.append(f"read back: {exc}")
        if errors:
            steps.end(record.outcome, f"{why}; rollback failed: {'; '.join(errors)}")
            raise RecoveryFailedError(f"proposal {record.proposal}: rollback failed: {'; '.join(errors)}")
        steps.report(Step.ROLLED_BACK, {"partitions": live, "resumed": resumed, "slurm_conf": restored})
        steps.end(Outcome.ROLLED_BACK, why)

    def _unpersist(self, record: ApplyRecord) -> str:
        before = {p.partition: p.before for p in record.plans}
        if record.done(Step.PERSISTED):
            return self.conf.restore(record.detail(Step.PERSISTED), before)
        if not (record.detail(Step.PLANNED).get("persist") and self.conf.path.exists()):
            return "untouched"
        # Interrupted between writing slurm.conf and reporting it: undo lines that hold `after`.
        text = self.conf.read()
        in_file = partition_nodes(text)
        ours = {
            p.partition: p.before for p in record.plans if set(in_file.get(p.partition, ())) == set(p.after)
        }
        if not ours:
            return "untouched"
        return self.conf.restore({}, ours)

    def _set_partitions(self, plans: Sequence[PartitionPlan], *, after: bool) -> None:
        """Give each partition its full list; the ones that lose nodes first, so none is in two pools."""
        live, nodes = self.live.partitions(), self.live.nodes()
        wanted = {p.partition: p.after if after else p.before for p in plans}
        unknown = sorted_nodes({name for names in wanted.values() for name in names} - set(nodes))
        if unknown:
            raise LiveStateError(f"nodes {','.join(unknown)} are no longer known to Slurm")
        todo = [name for name, names in wanted.items() if set(live.get(name, ())) != set(names)]
        todo.sort(key=lambda name: (not set(live.get(name, ())) - set(wanted[name]), name))
        for name in todo:
            self.live.set_partition(name, wanted[name])

    def _resume_ours(self, record: ApplyRecord) -> list[str]:
        """Resume the nodes this apply drained that still carry its reason (an admin's drain is kept)."""
        candidates = record.detail(Step.PLANNED).get("drain", [])
        if not candidates:
            return []
        nodes = self.live.nodes()
        ours = [
            name
            for name in candidates
            if name in nodes and nodes[name].draining and _is_ours(nodes[name].reason, record.reason)
        ]
        if ours:
            self.live.resume(ours)
        return ours

    def _verify(self, plans: Sequence[PartitionPlan], *, after: bool) -> dict[str, list[str]]:
        """Read the partitions back with sinfo; LiveStateError naming every mismatch."""
        live = self.live.partitions()
        seen = {p.partition: list(live.get(p.partition, ())) for p in plans}
        wrong = [
            f"{p.partition} has {node_value(seen[p.partition]) or '(none)'}, "
            f"wanted {node_value(p.after if after else p.before) or '(none)'}"
            for p in plans
            if set(seen[p.partition]) != set(p.after if after else p.before)
        ]
        if wrong:
            raise LiveStateError(f"read back with sinfo: {'; '.join(wrong)}")
        return seen
