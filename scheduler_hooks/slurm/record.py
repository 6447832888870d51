"""What an apply did, step by step: enough for an orchestrator to audit it and to recover after a crash.

Each step is reported through `on_step(step, detail)` as it completes, with plain JSON-ready detail; an
orchestrator that keeps those pairs can rebuild the record with `ApplyRecord.from_steps` and hand it to
`SlurmAdapter.recover`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from proposals.targets import slurm_partition_nodes


class Step(StrEnum):
    """The steps of a move, in order, then the two ways it can end early."""

    PLANNED = "planned"  # partitions with before/after, nodes to drain; nothing changed yet
    DRAINED = "drained"
    REQUEUED = "requeued"  # at the deadline, the jobs still running on the leaving nodes were requeued
    JOBS_ENDED = "jobs_ended"
    PARTITIONS_SET = "partitions_set"
    RESUMED = "resumed"
    VERIFIED = "verified"
    PERSISTED = "persisted"
    GAVE_UP = "gave_up"  # jobs outlived the deadline; the nodes were resumed
    ROLLED_BACK = "rolled_back"


class Outcome(StrEnum):
    """How an apply, rollback or recovery ended."""

    PENDING = "pending"
    NOOP = "noop"
    APPLIED = "applied"
    GAVE_UP = "gave_up"
    ROLLED_BACK = "rolled_back"


OnStep = Callable[[str, Mapping[str, Any]], None]


@dataclass(frozen=True)
class PartitionPlan:
    """One partition's full node list before and after (natural order)."""

    partition: str
    before: tuple[str, ...]
    after: tuple[str, ...]

    @property
    def target(self) -> str:
        """The change target this plan carries out."""
        return slurm_partition_nodes(self.partition)

    @property
    def leaving(self) -> frozenset[str]:
        """Nodes this partition loses."""
        return frozenset(self.before) - frozenset(self.after)


@dataclass(frozen=True)
class ApplyRecord:
    """The plan (from the `planned` step) and every step reported so far, in order."""

    proposal: str
    steps: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    outcome: Outcome = Outcome.PENDING
    error: str = ""

    @classmethod
    def from_steps(cls, proposal: str, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> ApplyRecord:
        """Rebuild a record from the (step, detail) pairs an orchestrator kept."""
        record = cls(proposal)
        for step, detail in steps:
            record = record.with_step(step, detail)
        if record.done(Step.ROLLED_BACK):
            return replace(record, outcome=Outcome.ROLLED_BACK)
        if record.done(Step.GAVE_UP):
            return replace(record, outcome=Outcome.GAVE_UP)
        persist = record.detail(Step.PLANNED).get("persist", False)
        if record.done(Step.PERSISTED if persist else Step.VERIFIED):
            return replace(record, outcome=Outcome.APPLIED)
        return record

    def with_step(self, step: str, detail: Mapping[str, Any]) -> ApplyRecord:
        """This record with one more step; ValueError for a step name not in `Step`."""
        return replace(self, steps=(*self.steps, (str(Step(step)), dict(detail))))

    @property
    def plans(self) -> tuple[PartitionPlan, ...]:
        """The partitions this apply changes, from the `planned` step (empty for a no-op)."""
        partitions: Mapping[str, Mapping[str, Sequence[str]]] = self.detail(Step.PLANNED).get(
            "partitions", {}
        )
        return tuple(
            PartitionPlan(name, tuple(value["before"]), tuple(value["after"]))
            for name, value in sorted(partitions.items())
        )

    def done(self, step: Step) -> bool:
        """Whether `step` was reported."""
        return any(name == step for name, _ in self.steps)

    def detail(self, step: Step) -> Mapping[str, Any]:
        """The detail of the last `step` reported (empty if none)."""
        return next((detail for name, detail in reversed(self.steps) if name == step), {})

    @property
    def drained(self) -> tuple[str, ...]:
        """Nodes this apply drained (and so must resume)."""
        return tuple(self.detail(Step.DRAINED).get("nodes", ()))

    @property
    def reason(self) -> str:
        """The drain reason this apply sets, which marks the nodes it drained."""
        return str(self.detail(Step.PLANNED).get("reason", ""))

    @property
    def ok(self) -> bool:
        """True when the change is in place (or there was nothing to do)."""
        return self.outcome in (Outcome.APPLIED, Outcome.NOOP)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "proposal": self.proposal,
            "outcome": str(self.outcome),
            "error": self.error,
            "steps": [[name, dict(detail)] for name, detail in self.steps],
        }
