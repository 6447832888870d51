"""The demo cluster: 16 nodes on a 4:1 fat tree, two interleaved pools, day/night demand, scripted events.

`recsys` (high priority, SL 1) and `llm` (normal, SL 0) each hold half of every leaf, so their multi-node
jobs share the leaf uplinks and the VL arbitration weights decide who gets what. Each pool is offered 0.65
of its capacity on average, peaking at opposite times of day. Scripted: an all-reduce heavy job in each
pool at `episode_at` (the congestion episode) and a GPU that falls off the bus at `fault_at`. In full:
docs/demo.md ("The scenario").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from demo.controls import ControlLog, LoggedModel
from demo.settings import HIGH_POOL, LOW_POOL, Timings
from simulator.cluster import ClusterSpec, FabricSpec, PoolSpec
from simulator.cluster.spec import node_names
from simulator.cluster.workload import DAY_SHAPE, NIGHT_SHAPE, GeneratedWorkload, JobRequest, at_load

NODES = 16
HOSTS_PER_LEAF = 8
GPUS_PER_NODE = 8
BURST_GPUS = 48  # six nodes: more than a pool has on one leaf, so the job crosses the uplinks
FAULT_NODE = "node0016"
PRIORITY_JOB = f"{HIGH_POOL}-allreduce-burst"
# PortXmitWait ticks of 64 KiB instead of 256 B: the 32-bit wait counters of a congested NDR port would
# saturate within a minute of simulated time and stay there for the whole run; with coarser ticks they
# count for hours. The embedded source is told the same tick size (EmbeddedSettings.wait_tick_bytes), and
# the alert replay the same setting through the rules' own override (`RULE_SETTINGS`).
WAIT_TICK_BYTES = 65536
LOAD = 0.65  # each pool's mean offered GPU demand over a day, as a share of its capacity
# The preset day/night shapes, the night pool's jobs sized for pools of eight nodes (the preset's 64-GPU
# jobs would take a whole pool here).
DAY = DAY_SHAPE
NIGHT = replace(NIGHT_SHAPE, sizes=((8, 0.3), (16, 0.4), (32, 0.3)), median_minutes=120.0)
RULE_SETTINGS = {
    "fleet:ibpool_fabric_port_wait_tick_bytes:default": f"vector({WAIT_TICK_BYTES})",
    "hca_type:ibpool_infiniband_wait_tick_bytes:override": (
        f'label_replace(vector({WAIT_TICK_BYTES}), "hca_type", "MT4129", "", "") or vector(0) < 0'
    ),
}


@dataclass(frozen=True)
class ScriptedEvent:
    """Something the scenario does at a simulated time: `job` (submit) or `fault` (POST /-/fault)."""

    at: float
    kind: str
    summary: str
    job: JobRequest | None = None
    faults: tuple[str, ...] = ()  # /-/fault query strings, posted in order


def demo_spec(
    seed: int = 1, start_hour: float = 6.0, nodes: int = NODES, hosts_per_leaf: int = HOSTS_PER_LEAF
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


def demo_workload(
    timings: Timings, seed: int = 1, nodes: int = NODES, hosts_per_leaf: int = HOSTS_PER_LEAF
) -> tuple[ClusterSpec, list[JobRequest]]:
    """The spec and the day/night jobs of the whole run, as a list (so a replayed model can be copied)."""
    spec = demo_spec(seed, timings.start_hour, nodes, hosts_per_leaf)
    half = nodes // 2 * GPUS_PER_NODE
    pools = [at_load(DAY, HIGH_POOL, half, LOAD), at_load(NIGHT, LOW_POOL, half, LOAD)]
    workload = GeneratedWorkload(
        pools, seed=seed, start_hour=timings.start_hour, horizon=timings.duration_seconds
    )
    return spec, list(workload)


def demo_model(
    timings: Timings,
    seed: int = 1,
    nodes: int = NODES,
    hosts_per_leaf: int = HOSTS_PER_LEAF,
    log: ControlLog | None = None,
) -> LoggedModel:
    """The model with its day/night workload, logging every change (the scripted events are the loop's)."""
    spec, jobs = demo_workload(timings, seed, nodes, hosts_per_leaf)
    return LoggedModel(spec, jobs, log)


def burst(pool: str, at: float, work_seconds: float, gpus: int = BURST_GPUS) -> JobRequest:
    """An all-reduce heavy job spanning leaves: 4 GB per iteration, 20 ms compute."""
    return JobRequest(
        pool,
        at,
        gpus,
        work_seconds,
        compute_seconds=0.02,
        allreduce_bytes=4e9,
        name=f"{pool}-allreduce-burst",
    )


def scripted(
    timings: Timings, fault_node: str = FAULT_NODE, burst_gpus: int = BURST_GPUS
) -> list[ScriptedEvent]:
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
            f"GPU 3 of {fault_node} reports XID 79 and falls off the bus",
            faults=(f"kind=xid&node={fault_node}&gpu=3&xid=79", f"kind=lose_gpu&node={fault_node}&gpu=3"),
        ),
    ]
