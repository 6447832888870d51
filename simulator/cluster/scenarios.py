"""Small ready-made clusters for tests, demos and the recommender's fabric scenario."""

from __future__ import annotations

from simulator.cluster.spec import ClusterSpec, FabricSpec, PoolSpec, QosSpec, node_names
from simulator.cluster.workload import JobRequest


def shared_uplink_spec(vlarb_low: tuple[tuple[int, int], ...] = ((0, 64), (1, 64))) -> ClusterSpec:
    """Two leaves of four hosts, one uplink each; pools `hi` (SL 1) and `lo` (SL 0) both span the leaves.

    A 16-GPU job in each pool puts one ring step of each on the same leaf uplinks, so the two pools share
    an oversubscribed link and the VL arbitration weights decide who gets what.
    """
    names = node_names(8)
    return ClusterSpec(
        nodes=names,
        pools=(
            PoolSpec("hi", (names[0], names[4]), "high"),
            PoolSpec("lo", (names[1], names[5]), "normal"),
        ),
        fabric=FabricSpec(hosts_per_leaf=4, oversubscription=4.0),
        qos=QosSpec(vlarb_low=vlarb_low),
    )


def chatty(pool: str, gpus: int = 16, work: float = 36_000.0) -> JobRequest:
    """A communication-bound job: a 4 GB all-reduce after 10 ms of compute per iteration."""
    return JobRequest(pool, 0.0, gpus, work, compute_seconds=0.01, allreduce_bytes=4e9, name=f"{pool}-chatty")
