"""Validation (every problem at once), staleness and idempotence, against captured live state."""

from __future__ import annotations

from pathlib import Path

from proposals.model import Change
from scheduler_hooks.slurm.parse import parse_nodes, parse_partitions
from scheduler_hooks.slurm.plan import check_changes, partition_of, plan_changes
from scheduler_hooks.slurm.record import PartitionPlan

DATA = Path(__file__).parent / "data"
PARTITIONS = parse_partitions((DATA / "sinfo_partitions.txt").read_text())
NODES = parse_nodes((DATA / "scontrol_nodes.txt").read_text())
T, I = "slurm.partition.training.nodes", "slurm.partition.inference.nodes"  # noqa: E741


def test_partition_of() -> None:
    assert partition_of(T) == "training"
    assert partition_of("opensm.partition.training.members") is None
    assert partition_of("slurm.partition.a b.nodes") is None


def test_a_good_move_has_no_problems() -> None:
    changes = [
        Change(T, "node1,node2,node3,node4", "node1,node2,node3"),
        Change(I, "node5,node6", "node4,node5,node6"),
    ]
    assert check_changes(changes, PARTITIONS, NODES, allow_empty=False) == []


def test_every_problem_is_reported_at_once() -> None:
    changes = [
        Change("opensm.vlarb_high", "0:4", "0:8"),
        Change(T, "node1,node2,node3,node4", "node1,node9"),
        Change("slurm.partition.nosuch.nodes", "", "node1"),
        Change(I, "node6,node5", "node[5-6]"),
        Change("slurm.partition.spare.nodes", "node8", ""),
        Change(T, "node1", "node2"),
    ]
    problems = check_changes(changes, PARTITIONS, NODES, allow_empty=False)
    assert problems == [
        "changes[0] (opensm.vlarb_high): not a slurm.partition.<pool>.nodes target",
        "changes[1] (slurm.partition.training.nodes).after: no such node(s) in Slurm: node9",
        "changes[2] (slurm.partition.nosuch.nodes): no partition nosuch in Slurm",
        "changes[3] (slurm.partition.inference.nodes).before: must be unique names in natural sort order: "
        "node5,node6",
        "changes[3] (slurm.partition.inference.nodes).after: 'node[5-6]' is not a plain node name "
        "(no hostlist ranges, no spaces)",
        "changes[4] (slurm.partition.spare.nodes).after: would leave partition spare empty (not allowed)",
        "changes[5] (slurm.partition.training.nodes): partition training is changed more than once",
    ]
    allowed = check_changes(changes[4:5], PARTITIONS, NODES, allow_empty=True)
    assert allowed == []


def test_plan_tells_done_stale_and_to_do_apart() -> None:
    changes = [
        Change(T, "node1,node2,node3,node4", "node1,node2,node3"),  # to do
        Change(I, "node5,node6,node7", "node5"),  # stale: live is node5,node6 (the failed update)
        Change("slurm.partition.spare.nodes", "node7", "node8"),  # done already
    ]
    plan = plan_changes(changes, PARTITIONS)
    assert plan.plans == (
        PartitionPlan("training", ("node1", "node2", "node3", "node4"), ("node1", "node2", "node3")),
    )
    assert plan.stale == (I,)
    assert plan.done == ("slurm.partition.spare.nodes",)
    assert plan.plans[0].leaving == frozenset({"node4"})
    assert plan.plans[0].target == T
