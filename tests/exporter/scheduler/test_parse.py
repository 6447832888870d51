"""Parsers on real Slurm 22.05 output (data/) and on garbage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exporter.scheduler.errors import ParseError, SlurmReportedError
from exporter.scheduler.model import Job
from exporter.scheduler.parse import parse_partition_names, parse_sinfo_nodes, parse_squeue_jobs
from tests.exporter.scheduler.fake_slurm import read


def test_sinfo_nodes_from_the_gres_cluster() -> None:
    nodes = {node.name: node for node in parse_sinfo_nodes(read("gres", "sinfo.json"))}
    assert sorted(nodes) == [f"node{i}" for i in range(1, 9)]
    assert {name: node.state for name, node in nodes.items()} == {
        "node1": "allocated",
        "node2": "allocated",
        "node3": "mixed",
        "node4": "idle",
        "node5": "draining",
        "node6": "fail",
        "node7": "down",
        "node8": "drained",
    }
    assert all(node.gres_gpus == 8 for node in nodes.values())
    assert nodes["node1"].partitions == ("training",)
    assert nodes["node8"].partitions == ("inference",)


def test_sinfo_nodes_without_gres() -> None:
    nodes = parse_sinfo_nodes(read("whole_nodes", "sinfo.json"))
    assert [(n.name, n.gres_gpus, n.partitions) for n in nodes] == [
        ("node1", 0, ("a",)),
        ("node2", 0, ("a",)),
        ("node3", 0, ("b",)),
        ("node4", 0, ("b",)),
    ]


def test_squeue_jobs_from_the_gres_cluster() -> None:
    jobs = parse_squeue_jobs(read("gres", "squeue.json"))
    assert jobs == [
        Job(1, ("training",), "RUNNING", 2, ("node1", "node2"), 16),
        Job(2, ("training",), "RUNNING", 1, ("node3",), 3),
        Job(3, ("inference",), "RUNNING", 1, ("node5",), 2),  # --gpus=2: tres_per_job
        Job(4, ("inference",), "RUNNING", 1, ("node5",), 0),
        Job(5, ("training",), "PENDING", 2, (), 16),  # --gres=gpu:8 on 2 nodes
        Job(6, ("training", "inference"), "PENDING", 4, (), 32),
        Job(7, ("inference",), "PENDING", 1, (), 4),  # held, --gpus=4
        Job(8, ("training",), "PENDING", 1, (), 2, count=4),  # held array 0-3 of 2 GPUs each
    ]


def test_partition_names() -> None:
    assert parse_partition_names(read("gres", "partitions.txt")) == ["training", "inference"]
    assert parse_partition_names("No partitions in the system\n") == []
    assert parse_partition_names("") == []


def test_controller_down_is_an_error_even_though_the_clients_exit_0() -> None:
    with pytest.raises(SlurmReportedError, match="Unspecified error"):
        parse_sinfo_nodes(read("down", "sinfo.json"))
    with pytest.raises(SlurmReportedError, match="slurm_load_jobs: Failed while looking for jobs"):
        parse_squeue_jobs(read("down", "squeue.json"))


def _doc(key: str, records: Any) -> str:
    return json.dumps({"meta": {}, "errors": [], key: records})


NODE = {"name": "n1", "state": "idle", "state_flags": [], "gres": "gpu:8", "partitions": ["p"]}
JOB = {
    "job_id": 1,
    "partition": "p",
    "job_state": "PENDING",
    "node_count": 2,
    "nodes": "",
    "tres_per_node": "gres:gpu:4",
}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"nodes": 3}',
        '{"errors": "bad", "nodes": []}',
        _doc("nodes", [1]),
        _doc("nodes", [{**NODE, "name": 7}]),
        _doc("nodes", [{**NODE, "name": ""}]),
        _doc("nodes", [{**NODE, "state": None}]),
        _doc("nodes", [{**NODE, "state_flags": "DRAIN,"}]) + "}",
        _doc("nodes", [{**NODE, "state_flags": [1]}]),
        _doc("nodes", [{**NODE, "gres": "gpu:x:y"}]),
        _doc("nodes", [{**NODE, "partitions": {"p": 1}}]),
    ],
)
def test_garbage_from_sinfo_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_sinfo_nodes(text)


@pytest.mark.parametrize(
    "record",
    [
        {**JOB, "job_id": None},
        {**JOB, "job_id": "1"},
        {**JOB, "job_id": True},
        {**JOB, "job_state": 3},
        {**JOB, "job_state": ""},
        {**JOB, "node_count": "two"},
        {**JOB, "nodes": "n[1-"},
        {**JOB, "partition": ["p"]},
        {**JOB, "tres_per_node": "gres:gpu:a:b"},
        {**JOB, "job_state": "RUNNING", "nodes": "n1", "gres_detail": "gpu:1"},
        {**JOB, "job_state": "RUNNING", "nodes": "n1", "gres_detail": [], "tres_alloc_str": "gres/gpu=x"},
        {**JOB, "array_task_string": "0-x"},
    ],
)
def test_garbage_from_squeue_is_a_parse_error(record: dict[str, Any]) -> None:
    with pytest.raises(ParseError):
        parse_squeue_jobs(_doc("jobs", [record]))


def test_garbage_from_scontrol_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_partition_names("PartitionName=a Nodes=x\nsomething else\n")


@pytest.mark.parametrize(
    ("changes", "gpus"),
    [
        ({"tres_per_job": "gres:gpu:3"}, 3),
        ({"tres_per_node": "gres:gpu:4"}, 8),
        ({"tres_per_node": "", "tres_per_task": "gres:gpu:1", "tasks": 6}, 6),
        ({"tres_per_node": "", "tres_per_socket": "gres:gpu:2", "sockets_per_node": 2}, 8),
        ({"tres_per_node": "", "tres_req_str": "cpu=2,gres/gpu=5"}, 5),
        ({"tres_per_node": ""}, 0),
    ],
)
def test_gpus_requested_by_a_pending_job(changes: dict[str, Any], gpus: int) -> None:
    (job,) = parse_squeue_jobs(_doc("jobs", [{**JOB, **changes}]))
    assert job.gpus == gpus


@pytest.mark.parametrize(
    ("changes", "gpus"),
    [
        ({"gres_detail": ["gpu:a100:4(IDX:0-3)", "gpu:a100:2(IDX:0,5)"]}, 6),
        ({"gres_detail": [], "tres_alloc_str": "cpu=2,gres/gpu=7,gres/gpu:a100=7"}, 7),
        ({"gres_detail": [], "tres_alloc_str": "cpu=2"}, 8),  # falls back to the request: 4 x 2 nodes
    ],
)
def test_gpus_held_by_a_running_job(changes: dict[str, Any], gpus: int) -> None:
    record = {**JOB, "job_state": "RUNNING", "nodes": "n[1-2]", **changes}
    (job,) = parse_squeue_jobs(_doc("jobs", [record]))
    assert job.gpus == gpus
    assert job.nodes == ("n1", "n2")


def test_shapes_of_later_slurm_versions_are_accepted() -> None:
    node = {**NODE, "state": ["IDLE", "DRAIN"]}
    del node["state_flags"]
    assert parse_sinfo_nodes(_doc("nodes", [node]))[0].state == "drained"
    record = {
        **JOB,
        "job_id": {"set": True, "infinite": False, "number": 9},
        "job_state": ["PENDING"],
        "node_count": {"set": True, "infinite": False, "number": 3},
        "tres_per_node": "gres/gpu:2",
    }
    (job,) = parse_squeue_jobs(_doc("jobs", [record]))
    assert (job.job_id, job.state, job.node_count, job.gpus) == (9, "PENDING", 3, 6)
