"""The demo cluster: 32 nodes on a 2:1 fat tree, two interleaved pools, day/night demand, scripted events.

`recsys` (high priority, SL 1) and `llm` (normal, SL 0) each hold four hosts of every leaf, so their
multi-node jobs share the leaf uplinks and the VL arbitration weights decide who gets what. Demand: the
recommender-training pool peaks by day (offered about 1.6 times its capacity) while the LLM pool
peaks at night (about half its capacity), so by mid-morning `recsys` queues while `llm` has idle nodes.
Scripted: an all-reduce heavy job in each pool at `episode_at` (the congestion episode on the shared
uplinks), and a GPU that falls off the bus on an `llm` node at `fault_at` (its job fails, the node drains).
"""

from __future__ import annotations

from dataclasses import dataclass

from demo.settings import HIGH_POOL, LOW_POOL, Timings
from simulator.cluster import ClusterModel, ClusterSpec, FabricSpec, PoolSpec, day_night_workload
from simulator.cluster.spec import node_names
from simulator.cluster.workload import JobRequest

NODES = 32
HOSTS_PER_LEAF = 8
GPUS_PER_NODE = 8
# PortXmitWait ticks of 64 KiB instead of 256 B: the 32-bit wait counters of a congested NDR port would
# saturate within a minute of simulated time and stay there for the whole run; with coarser ticks they
# count for hours. The embedded source is told the same tick size (EmbeddedSettings.wait_tick_bytes).
WAIT_TICK_BYTES = 65536


@dataclass(frozen=True)
class ScriptedEvent:
    """Something the scenario does at a simulated time: `job` (submit) or `fault` (POST /-/fault)."""

    at: float
    kind: str
    summary: str
    job: JobRequest | None = None
    fault: str = ""  # the /-/fault query string


def demo_spec(
    seed: int = 1, start_hour: float = 8.0, nodes: int = NODES, hosts_per_leaf: int = HOSTS_PER_LEAF
) -> ClusterSpec:
    """The demo cluster's spec (`nodes` hosts, `hosts_per_leaf` per leaf, pools interleaved on each leaf)."""
    names = node_names(nodes)
    high = tuple(n for i, n in enumerate(names) if i % hosts_per_leaf < hosts_per_leaf // 2)
    low = tuple(n for n in names if n not in high)
    return ClusterSpec(
        nodes=names,
        pools=(PoolSpec(HIGH_POOL, high, "high"), PoolSpec(LOW_POOL, low, "normal")),
        fabric=FabricSpec(
            hosts_per_leaf=hosts_per_leaf, oversubscription=4.0, wait_tick_bytes=WAIT_TICK_BYTES
        ),
        gpus_per_node=GPUS_PER_NODE,
        seed=seed,
        start_hour=start_hour,
    )


def demo_model(
    timings: Timings, seed: int = 1, nodes: int = NODES, hosts_per_leaf: int = HOSTS_PER_LEAF
) -> ClusterModel:
    """The model with its day/night workload (the scripted events are applied by the demo loop)."""
    spec = demo_spec(seed, timings.start_hour, nodes, hosts_per_leaf)
    half = nodes // 2 * GPUS_PER_NODE
    workload = day_night_workload(
        HIGH_POOL, LOW_POOL, half * 8 // 5, half // 2, seed=seed, start_hour=timings.start_hour
    )
    return ClusterModel(spec, workload)


def burst(pool: str, at: float, work_seconds: float, gpus: int = 64) -> JobRequest:
    """An all-reduce heavy job spanning leaves (64 GPUs = 8 nodes): 4 GB per iteration, 20 ms compute."""
    return JobRequest(
        pool,
        at,
        gpus,
        work_seconds,
        compute_seconds=0.02,
        allreduce_bytes=4e9,
        name=f"{pool}-allreduce-burst",
    )


def scripted(timings: Timings, fault_node: str = "node0024", burst_gpus: int = 64) -> list[ScriptedEvent]:
    """The congestion episode (one burst per pool) and the GPU fault, in time order."""
    at, work = timings.episode_at, timings.episode_work_seconds
    return [
        *(
            ScriptedEvent(
                at,
                "job",
                f"{pool}: {burst_gpus}-GPU all-reduce heavy job",
                job=burst(pool, at, work, burst_gpus),
            )
            for pool in (HIGH_POOL, LOW_POOL)
        ),
        ScriptedEvent(
            timings.fault_at,
            "fault",
            f"GPU 3 of {fault_node} falls off the bus (XID 79)",
            fault=f"kind=lose_gpu&node={fault_node}&gpu=3",
        ),
    ]
