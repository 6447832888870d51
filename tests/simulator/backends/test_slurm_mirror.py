"""SlurmMirror against recorded sinfo output: partitions, drains and what the model does with them."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from simulator.backends.errors import SlurmReadError
from simulator.backends.slurm_mirror import (
    NODES_ARGV,
    PARTITIONS_ARGV,
    SlurmMirror,
    SlurmState,
    command_runner,
    parse_drained,
    parse_partitions,
    slurm_layout,
)
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty
from simulator.cluster.spec import simple_spec


class FakeSlurm:
    """Answers the two sinfo calls with whatever the test sets."""

    def __init__(self, partitions: str, nodes: str = "") -> None:
        self.partitions, self.nodes = partitions, nodes

    def __call__(self, argv: Sequence[str]) -> str:
        if tuple(argv) == PARTITIONS_ARGV:
            return self.partitions
        assert tuple(argv) == NODES_ARGV
        return self.nodes


def model() -> ClusterModel:
    return ClusterModel(simple_spec({"a": 4, "b": 4}, hosts_per_leaf=4))


def test_sinfo_output_parses() -> None:
    text = "a node[0001-0003]\nb node0004,node[0006-0007]\na node0003,node0005\nempty \nnone n/a\n"
    assert parse_partitions(text) == {
        "a": ("node0001", "node0002", "node0003", "node0005"),
        "b": ("node0004", "node0006", "node0007"),
        "empty": (),
        "none": (),
    }
    with pytest.raises(SlurmReadError, match="partition a"):
        parse_partitions("a node[1-\n")
    nodes = "node0001|idle|none\nnode0002|drained|moving pools\nnode0003|draining*|x|y\nnode0004|mixed|none\n"
    nodes += "node0005|idle+drain|none\nnode0002|drained|moving pools\n"
    assert parse_drained(nodes) == {"node0002": "moving pools", "node0003": "x|y", "node0005": ""}


def test_a_partition_move_in_slurm_changes_the_models_pools() -> None:
    cluster = model()
    slurm = FakeSlurm("a node[0001-0005]\nb node[0006-0008]\nspare \n")
    mirror = SlurmMirror(cluster, {}, run=slurm)
    result = mirror.sync()
    assert result.moved == {
        "a": (("node0001", "node0002", "node0003", "node0004"), tuple(f"node000{i}" for i in range(1, 6))),
        "b": (tuple(f"node000{i}" for i in range(5, 9)), ("node0006", "node0007", "node0008")),
    }
    view = cluster.scheduler_view()
    assert view.pools["a"].capacity_gpus == 40 and view.pools["b"].capacity_gpus == 24
    assert result.unknown_partitions == ("spare",) and result.missing_pools == ()
    assert not mirror.sync().changed  # already in step


def test_drains_follow_slurm_but_a_lost_gpu_keeps_its_node_drained() -> None:
    cluster = model()
    cluster.lose_gpu("node0008", 0)  # the model drains node0008 itself ("gpu 0 lost")
    slurm = FakeSlurm("a node[0001-0004]\nb node[0005-0008]\n", "node0002|drained|moving pools\n")
    mirror = SlurmMirror(cluster, {}, run=slurm)
    assert mirror.sync().drained == ("node0002",)
    nodes = cluster.scheduler_view().nodes
    assert nodes["node0002"].state == "drained" and nodes["node0002"].reason == "moving pools"
    slurm.nodes = "node0002|idle|none\n"
    result = mirror.sync()
    assert result.resumed == ("node0002",) and result.drained == ()
    nodes = cluster.scheduler_view().nodes
    assert nodes["node0002"].state == "idle" and nodes["node0008"].state == "drained"  # its GPU is lost
    cluster.restore_gpu("node0008", 0)
    assert mirror.sync().resumed == ("node0008",)  # Slurm never drained it: the model follows Slurm


def test_a_drained_node_keeps_its_jobs_and_takes_no_new_ones() -> None:
    cluster = model()
    job = cluster.submit(chatty("a", gpus=8))
    node = cluster.scheduler_view().pools["a"].nodes[0]
    assert job in cluster.scheduler_view().nodes[node].jobs
    SlurmMirror(cluster, {}, run=FakeSlurm("a node[0001-0004]\n", f"{node}|draining|move\n")).sync()
    assert cluster.scheduler_view().nodes[node].state == "draining"


def test_a_node_drained_and_moved_in_one_sync_takes_no_new_job() -> None:
    cluster = model()
    big = cluster.submit(chatty("a", gpus=40))  # five nodes: more than pool a has
    slurm = FakeSlurm("a node[0001-0005]\nb node[0006-0008]\n", "node0005|drained|moving\n")
    SlurmMirror(cluster, {}, run=slurm).sync()
    assert cluster.jobs[big].state == "pending"
    slurm.nodes = ""
    assert SlurmMirror(cluster, {}, run=slurm).sync().resumed == ("node0005",)  # no memory needed
    assert cluster.jobs[big].state == "running"


def test_unknown_nodes_change_nothing() -> None:
    cluster = model()
    mirror = SlurmMirror(cluster, {}, run=FakeSlurm("a node[0001-0009]\n"))
    with pytest.raises(SlurmReadError, match="node0009"):
        mirror.sync()
    assert len(cluster.scheduler_view().pools["a"].nodes) == 4
    with pytest.raises(SlurmReadError, match="ghost"):
        mirror.apply(SlurmState({"b": ("node0005",)}, {"ghost": ""}))
    assert len(cluster.scheduler_view().pools["b"].nodes) == 4


def test_layout_matches_the_model() -> None:
    layout = slurm_layout(model())
    assert layout.nodes[0] == "node0001" and len(layout.nodes) == 8 and layout.gpus_per_node == 8
    assert layout.partitions["b"] == ("node0005", "node0006", "node0007", "node0008")
    lines = layout.conf_lines()
    assert lines[0] == "NodeName=node0001 CPUs=1 RealMemory=500 State=UNKNOWN Gres=gpu:8"
    assert lines[-2:] == [
        "PartitionName=a Nodes=node0001,node0002,node0003,node0004 Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=b Nodes=node0005,node0006,node0007,node0008 Default=NO MaxTime=INFINITE State=UP",
    ]


def test_the_runner_reports_failures() -> None:
    run = command_runner({"PATH": "/usr/bin:/bin"})
    assert run(["echo", "a", "b"]) == "a b\n"
    with pytest.raises(SlurmReadError, match="false: exit 1"):
        run(["false"])
    with pytest.raises(SlurmReadError, match="no-such-program"):
        run(["no-such-program-ibpool"])
