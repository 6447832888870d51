"""Per-pool aggregation: the rules of exporter/scheduler/pools.py on captured and hand-made polls."""

from __future__ import annotations

from exporter.scheduler.model import ClusterState, Job, Node
from exporter.scheduler.pools import PoolStats, summarise
from tests.exporter.scheduler.fake_slurm import cluster_state

TRAINING = ("node1", "node2", "node3", "node4")
INFERENCE = ("node5", "node6", "node7", "node8")


def test_gres_cluster() -> None:
    snapshot = summarise(cluster_state("gres"))
    assert snapshot.gpu_source == "gres"
    assert snapshot.pools == (
        PoolStats("inference", INFERENCE, 32, 2, 32 + 4, 2, 2),
        PoolStats("training", TRAINING, 32, 16 + 3, 16 + 32 + 4 * 2, 1 + 1 + 4, 2),
    )
    assert dict(snapshot.node_states)["node5"] == "draining"


def test_configured_gpus_per_node_are_ignored_when_nodes_have_gres() -> None:
    assert summarise(cluster_state("gres"), gpus_per_node=4) == summarise(cluster_state("gres"))


def test_whole_nodes_with_configured_gpus_per_node() -> None:
    snapshot = summarise(cluster_state("whole_nodes"), gpus_per_node=8)
    assert snapshot.gpu_source == "configured"
    assert snapshot.pools == (
        PoolStats("a", ("node1", "node2"), 16, 8, 16, 1, 2),  # two running jobs share node1
        PoolStats("b", ("node3", "node4"), 16, 16, 0, 0, 1),
    )


def test_gpu_figures_are_unknown_without_gres_or_configuration() -> None:
    snapshot = summarise(cluster_state("whole_nodes"))
    assert snapshot.gpu_source == "unknown"
    assert [(p.capacity_gpus, p.allocated_gpus, p.pending_gpus) for p in snapshot.pools] == [(None,) * 3] * 2
    assert [(p.running_jobs, p.pending_jobs) for p in snapshot.pools] == [(2, 1), (1, 0)]


def _state(nodes: list[Node], jobs: list[Job], partitions: tuple[str, ...] = ("p", "q")) -> ClusterState:
    return ClusterState(tuple(nodes), tuple(jobs), partitions)


def test_states_that_hold_an_allocation_count_as_allocated_but_only_running_as_running() -> None:
    nodes = [Node("n1", "mixed", ("p",), 8)]
    jobs = [
        Job(1, ("p",), "RUNNING", 1, ("n1",), 1),
        Job(2, ("p",), "COMPLETING", 1, ("n1",), 2),
        Job(3, ("p",), "SUSPENDED", 1, ("n1",), 1),
        Job(4, ("p",), "CONFIGURING", 1, ("n1",), 1),
        Job(5, ("p",), "COMPLETED", 1, ("n1",), 4),
        Job(6, ("p",), "CANCELLED", 1, (), 4),
    ]
    (pool, _) = summarise(_state(nodes, jobs)).pools
    assert (pool.allocated_gpus, pool.running_jobs, pool.pending_jobs, pool.pending_gpus) == (5, 1, 0, 0)


def test_a_job_pending_in_two_pools_counts_in_both_and_unknown_pools_are_ignored() -> None:
    nodes = [Node("n1", "idle", ("p",), 8), Node("n2", "idle", ("q",), 8)]
    jobs = [Job(1, ("p", "q", "gone"), "PENDING", 2, (), 16), Job(2, ("gone",), "RUNNING", 1, ("n9",), 8)]
    snapshot = summarise(_state(nodes, jobs))
    assert [(p.name, p.pending_jobs, p.pending_gpus, p.allocated_gpus) for p in snapshot.pools] == [
        ("p", 1, 16, 0),
        ("q", 1, 16, 0),
    ]


def test_empty_pools_and_nodes_in_two_pools() -> None:
    nodes = [Node("n1", "idle", ("p", "q"), 4), Node("n2", "down", ("p",), 4)]
    snapshot = summarise(_state(nodes, [], ("p", "q", "empty")))
    assert [(p.name, p.nodes, p.capacity_gpus) for p in snapshot.pools] == [
        ("empty", (), 0),
        ("p", ("n1", "n2"), 8),
        ("q", ("n1",), 4),
    ]
    assert snapshot.node_states == (("n1", "idle"), ("n2", "down"))


def test_whole_nodes_of_jobs_without_node_names_count_by_node_count() -> None:
    nodes = [Node(f"n{i}", "allocated", ("p",), 0) for i in range(4)]
    jobs = [Job(1, ("p",), "RUNNING", 2, ("n0", "n1"), 0), Job(2, ("p",), "RUNNING", 1, (), 0)]
    (pool, _) = summarise(_state(nodes, jobs), gpus_per_node=4).pools
    assert pool.allocated_gpus == 3 * 4


def test_pending_arrays_count_each_task() -> None:
    nodes = [Node("n1", "idle", ("p",), 8)]
    jobs = [Job(1, ("p",), "PENDING", 1, (), 2, count=10)]
    (pool, _) = summarise(_state(nodes, jobs)).pools
    assert (pool.pending_jobs, pool.pending_gpus) == (10, 20)
    (pool, _) = summarise(_state([Node("n1", "idle", ("p",), 0)], jobs), gpus_per_node=8).pools
    assert (pool.pending_jobs, pool.pending_gpus) == (10, 80)
