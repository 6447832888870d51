"""The `--real` cluster: 8 nodes of 8 GPUs on two leaves of 4 hosts (4:1 oversubscribed, one spine).

Pools interleave as in the default demo (`recsys` high priority: the first two hosts of each leaf;
`llm`: the other two), so multi-node jobs share the leaf uplinks. Demand and scripted events are the
default demo's scaled to a quarter: 24-GPU all-reduce bursts, and the GPU fault on an `llm` node.
"""

from __future__ import annotations

from demo.scenario import WAIT_TICK_BYTES, ScriptedEvent
from demo.settings import HIGH_POOL, LOW_POOL, Timings
from simulator.cluster import ClusterModel, ClusterSpec, FabricSpec, PoolSpec, day_night_workload
from simulator.cluster.spec import node_names
from simulator.cluster.workload import JobRequest

NODES = 8
HOSTS_PER_LEAF = 4
GPUS_PER_NODE = 8
FAULT_NODE = "node0008"


def real_spec(seed: int = 1, start_hour: float = 8.0) -> ClusterSpec:
    """The small cluster's spec."""
    names = node_names(NODES)
    high = tuple(n for i, n in enumerate(names) if i % HOSTS_PER_LEAF < HOSTS_PER_LEAF // 2)
    low = tuple(n for n in names if n not in high)
    return ClusterSpec(
        nodes=names,
        pools=(PoolSpec(HIGH_POOL, high, "high"), PoolSpec(LOW_POOL, low, "normal")),
        fabric=FabricSpec(
            hosts_per_leaf=HOSTS_PER_LEAF, oversubscription=4.0, wait_tick_bytes=WAIT_TICK_BYTES
        ),
        gpus_per_node=GPUS_PER_NODE,
        seed=seed,
        start_hour=start_hour,
    )


def real_model(timings: Timings, seed: int = 1) -> ClusterModel:
    """The small model with its day/night workload."""
    spec = real_spec(seed, timings.start_hour)
    half = NODES // 2 * GPUS_PER_NODE
    workload = day_night_workload(
        HIGH_POOL, LOW_POOL, half * 8 // 5, half // 2, seed=seed, start_hour=timings.start_hour
    )
    return ClusterModel(spec, workload)


def _burst(pool: str, at: float, work_seconds: float) -> JobRequest:
    return JobRequest(
        pool, at, 24, work_seconds, compute_seconds=0.02, allreduce_bytes=4e9, name=f"{pool}-allreduce-burst"
    )


def real_scripted(timings: Timings) -> list[ScriptedEvent]:
    """The congestion episode (24-GPU bursts: three nodes, so they span both leaves) and the GPU fault."""
    at, work = timings.episode_at, timings.episode_work_seconds
    return [
        ScriptedEvent(
            at, "job", f"{HIGH_POOL}: 24-GPU all-reduce heavy job", job=_burst(HIGH_POOL, at, work)
        ),
        ScriptedEvent(at, "job", f"{LOW_POOL}: 24-GPU all-reduce heavy job", job=_burst(LOW_POOL, at, work)),
        ScriptedEvent(
            timings.fault_at,
            "fault",
            f"GPU 3 of {FAULT_NODE} falls off the bus (XID 79)",
            fault=f"kind=lose_gpu&node={FAULT_NODE}&gpu=3",
        ),
    ]
