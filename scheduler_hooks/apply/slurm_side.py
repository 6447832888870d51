"""The Slurm side: SlurmAdapter apply (it undoes itself on failure), rollback and recovery from steps.

The adapter reports each step after it is done; `ApplyRecord.from_steps` rebuilds its record from the
steps the store kept, which is all that rollback and recovery need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proposals.model import Change
from proposals.targets import sorted_nodes
from scheduler_hooks.apply.sides import AFTER, BEFORE, STALE, Recorded, SideFailedError, SideResult, StepSink
from scheduler_hooks.errors import HookError, SlurmApplyFailedError
from scheduler_hooks.slurm import ApplyRecord, Outcome, SlurmAdapter, SlurmConfig, Step
from scheduler_hooks.slurm.config import REQUEUE
from scheduler_hooks.slurm.plan import plan_changes

_UNDONE = (Step.ROLLED_BACK, Step.GAVE_UP)


class SlurmSide:
    """Slurm partitions (pools), through SlurmAdapter."""

    name = "slurm"

    def __init__(self, config: SlurmConfig, adapter: SlurmAdapter | None = None) -> None:
        self.config = config
        self.adapter = adapter or SlurmAdapter(config)

    def close(self) -> None:
        """Nothing to release."""

    # --- reading ---------------------------------------------------------------------------------

    def handles(self, target: str) -> bool:
        """Targets named `slurm.partition.<pool>.nodes`."""
        return SlurmAdapter.handles(target)

    def read(self, target: str) -> str:
        """The partition's full node list as sinfo shows it."""
        return self.adapter.read(target)

    def status(self, changes: Sequence[Change]) -> dict[str, str]:
        """`after` where the partition holds `after`, `stale` where it holds neither side."""
        try:
            plan = plan_changes(changes, self.adapter.live.partitions())
        except ValueError as exc:
            raise SideFailedError(f"slurm: {exc}", undone=True) from None
        done, stale = set(plan.done), set(plan.stale)
        return {
            c.target: AFTER if c.target in done else STALE if c.target in stale else BEFORE for c in changes
        }

    def validate(self, changes: Sequence[Change]) -> list[str]:
        """Names, partitions, nodes, empty partitions and slurm.conf, every problem at once."""
        return [f"slurm: {problem}" for problem in self.adapter.validate(changes)]

    def describe(self, changes: Sequence[Change], reclaim: Sequence[str] = ()) -> list[str]:
        """Nodes to drain, a reclaim's requeue (or that it is applied as a drain), the partition updates,
        the read-back and persistence."""
        plan = plan_changes(changes, self.adapter.live.partitions())
        leaving = sorted_nodes(set().union(*(p.leaving for p in plan.plans)))
        reclaimed = [name for name in leaving if name in set(reclaim)]
        at_once = self.config.requeued_at_once(reclaimed)
        waiting = [name for name in leaving if name not in at_once]
        lines = []
        requeue = self.config.on_drain_deadline == REQUEUE
        then = "requeue the jobs still running" if requeue else "give up and resume"
        deadline = f"deadline {self.config.drain_deadline_seconds:g} s, then {then}"
        if at_once:
            lines.append(
                f"reclaim {','.join(at_once)} (slurm.reclaims: allow): drain, and requeue the jobs running "
                f"there at once (scontrol requeue: their work since the last checkpoint is lost), then wait "
                f"up to {self.config.command_timeout_seconds:g} s for them to leave"
            )
        if waiting:
            lines.append(f"drain {','.join(waiting)} and wait for their running jobs to end ({deadline})")
        if reclaimed and not at_once:
            lines.append(
                f"the proposal reclaims {','.join(reclaimed)}: applied as a drain (slurm.reclaims: "
                f"as_drain): nothing is requeued {'before the deadline' if requeue else 'for it'}"
            )
        lines += [
            f"scontrol update PartitionName={p.partition} Nodes={','.join(p.after)}" for p in plan.plans
        ]
        if leaving:
            lines.append(f"resume {','.join(leaving)}")
        lines.append("read the partitions back with sinfo; on a failure set the previous lists again")
        if self.config.persist:
            lines.append(f"write the new node lists into {self.config.slurm_conf} (previous version kept)")
        return lines

    # --- acting ----------------------------------------------------------------------------------

    def apply(
        self, proposal_id: str, changes: Sequence[Change], sink: StepSink, reclaim: Sequence[str] = ()
    ) -> SideResult:
        """Drain, wait (a reclaim's nodes: requeue at once, with `reclaims: allow`), set the full lists,
        resume, read back (and persist); undone on a failure."""
        seen: list[str] = []

        def keep(step: str, detail: Mapping[str, Any]) -> None:
            seen.append(step)
            sink(step, detail)

        try:
            record = self.adapter.apply(changes, keep, proposal=proposal_id, reclaim=reclaim)
        except HookError as exc:
            # Nothing changed before `planned`; after it, only a reported rollback or give-up undid it.
            undone = not seen or seen[-1] in _UNDONE
            raise SideFailedError(f"slurm: {exc}", undone) from exc
        return SideResult.NOOP if record.outcome is Outcome.NOOP else SideResult.APPLIED

    def rollback(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> None:
        """Previous full lists, our nodes resumed, slurm.conf restored, read back."""
        record = ApplyRecord.from_steps(proposal_id, recorded)
        if not record.plans or record.outcome in (Outcome.ROLLED_BACK, Outcome.GAVE_UP):
            return
        try:
            self.adapter.rollback(record, sink)
        except HookError as exc:
            raise SideFailedError(f"slurm: rollback failed: {exc}", undone=False) from exc

    def recover(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> SideResult:
        """Forward once the partitions were set, else back (the adapter's rule)."""
        record = ApplyRecord.from_steps(proposal_id, recorded)
        if record.outcome in (Outcome.ROLLED_BACK, Outcome.GAVE_UP):
            return SideResult.ROLLED_BACK
        if record.outcome is Outcome.APPLIED:
            return SideResult.APPLIED
        try:
            if not record.plans:
                at_after = all(value == AFTER for value in self.status(changes).values())
                return SideResult.NOOP if at_after else SideResult.UNTOUCHED
            done = self.adapter.recover(record, sink)
        except SlurmApplyFailedError:
            return SideResult.ROLLED_BACK  # the forward path failed and was undone
        except HookError as exc:
            raise SideFailedError(f"slurm: recovery failed: {exc}", undone=False) from exc
        return SideResult.APPLIED if done.outcome is Outcome.APPLIED else SideResult.ROLLED_BACK
