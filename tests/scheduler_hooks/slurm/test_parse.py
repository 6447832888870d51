"""Parsing captured Slurm 22.05 output (see data/README.md for how it was made)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_hooks.errors import LiveStateError
from scheduler_hooks.slurm.parse import parse_jobs, parse_nodes, parse_partitions, split_state

DATA = Path(__file__).parent / "data"


def test_partitions_from_sinfo_trust_its_count() -> None:
    partitions = parse_partitions((DATA / "sinfo_partitions.txt").read_text())
    assert partitions == {
        "training": ("node1", "node2", "node3", "node4"),
        # After the failed update scontrol still prints node[5-7]; sinfo counts the two that are left.
        "inference": ("node5", "node6"),
        "spare": ("node8",),
        "empty": (),
    }
    assert "Nodes=node[5-7]" in (DATA / "scontrol_partitions.txt").read_text()


def test_partitions_split_over_lines_are_merged() -> None:
    assert parse_partitions("a 2 n[1-2]\nb 1 n3\na 1 n9\n") == {"a": ("n1", "n2", "n9"), "b": ("n3",)}


@pytest.mark.parametrize("text", ["a 3 n[1-2]\n", "a two n1\n", "a\n", "a 1 n[1-\n", "a 1 n1 extra\n"])
def test_partitions_refuse_what_does_not_add_up(text: str) -> None:
    with pytest.raises(LiveStateError):
        parse_partitions(text)


def test_nodes_from_scontrol() -> None:
    nodes = parse_nodes((DATA / "scontrol_nodes.txt").read_text())
    assert sorted(nodes) == [f"node{i}" for i in range(1, 9)]
    node1, node2, node3, node4, node5, node6, node7 = (nodes[f"node{i}"] for i in range(1, 8))
    assert (node4.state, node4.flags) == ("MIXED", frozenset({"DRAIN"}))
    assert node4.draining and node4.busy and not node4.down
    assert node4.reason.startswith("ibpool move 0123abcd [root@")
    assert node3.draining and not node3.busy and node3.reason.startswith("disk failure")
    assert node1.down and node1.draining
    assert node2.down and not node2.draining
    assert node5.busy and not node5.draining and node5.reason == ""
    assert not node6.busy and node6.partitions == ("inference",)
    assert node7.partitions == ()  # dropped from inference by the failed update


@pytest.mark.parametrize(
    ("text", "state", "flags"),
    [
        ("IDLE", "IDLE", set()),
        ("MIXED+DRAIN", "MIXED", {"DRAIN"}),
        ("IDLE*", "IDLE", {"NOT_RESPONDING"}),
        ("down*+drain", "DOWN", {"NOT_RESPONDING", "DRAIN"}),
        ("ALLOCATED+COMPLETING", "ALLOCATED", {"COMPLETING"}),
    ],
)
def test_split_state(text: str, state: str, flags: set[str]) -> None:
    assert split_state(text) == (state, frozenset(flags))


def test_nodes_refuse_lines_without_name_or_state() -> None:
    with pytest.raises(LiveStateError):
        parse_nodes("Arch=x86_64 CPUTot=2\n")


def test_jobs_from_squeue() -> None:
    jobs = parse_jobs((DATA / "squeue_jobs.txt").read_text() + "3 PD \n7 R node[1-2]\n")
    assert [(job.job_id, job.state, job.nodes) for job in jobs] == [
        ("2", "R", ("node5",)),
        ("1", "R", ("node4",)),
        ("3", "PD", ()),
        ("7", "R", ("node1", "node2")),
    ]


def test_jobs_refuse_garbage() -> None:
    with pytest.raises(LiveStateError):
        parse_jobs("1 R node1 what\n")
