"""ApplyRecord: rebuilt from the (step, detail) pairs an orchestrator kept, with the right outcome."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_hooks.slurm.record import ApplyRecord, Outcome, PartitionPlan, Step

PLANNED: dict[str, Any] = {
    "partitions": {
        "training": {"before": ["node1", "node2"], "after": ["node1"]},
        "inference": {"before": ["node3"], "after": ["node2", "node3"]},
    },
    "leaving": ["node2"],
    "drain": ["node2"],
    "reason": "ibpool move p1",
    "persist": True,
}


def test_from_steps_rebuilds_plans_and_progress() -> None:
    record = ApplyRecord.from_steps("p1", [("planned", PLANNED), ("drained", {"nodes": ["node2"]})])
    assert record.plans == (
        PartitionPlan("inference", ("node3",), ("node2", "node3")),
        PartitionPlan("training", ("node1", "node2"), ("node1",)),
    )
    assert record.drained == ("node2",)
    assert record.reason == "ibpool move p1"
    assert record.done(Step.DRAINED) and not record.done(Step.PARTITIONS_SET)
    assert record.outcome is Outcome.PENDING and not record.ok


@pytest.mark.parametrize(
    ("last", "persist", "outcome"),
    [
        ("verified", True, Outcome.PENDING),
        ("verified", False, Outcome.APPLIED),
        ("persisted", True, Outcome.APPLIED),
        ("gave_up", True, Outcome.GAVE_UP),
        ("rolled_back", True, Outcome.ROLLED_BACK),
    ],
)
def test_outcome_follows_the_last_step(last: str, persist: bool, outcome: Outcome) -> None:
    steps = [("planned", {**PLANNED, "persist": persist}), (last, {})]
    assert ApplyRecord.from_steps("p1", steps).outcome is outcome


def test_unknown_step_is_refused() -> None:
    with pytest.raises(ValueError):
        ApplyRecord("p1").with_step("exploded", {})


def test_to_dict_is_plain() -> None:
    record = ApplyRecord.from_steps("p1", [("planned", PLANNED)])
    assert record.to_dict() == {
        "proposal": "p1",
        "outcome": "pending",
        "error": "",
        "steps": [["planned", PLANNED]],
    }
