"""Per-pool (partition) figures from one poll.

The counting rules, chosen once for the whole cluster (in full: docs/scheduler-exporter.md): GPUs come
from GRES when any node advertises GPUs there, else from a configured GPUs-per-node (whole nodes), else
they are unknown and left out. Capacity counts every member node whatever its state. A job pending in
several partitions counts in each. Pools are the partitions Slurm lists (an empty one has capacity 0);
jobs that name a partition that no longer exists are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from exporter.scheduler.model import ClusterState, Job

GpuSource = Literal["gres", "configured", "unknown"]


@dataclass(frozen=True)
class PoolStats:
    """One pool's figures; GPU figures are None when unknown (no GRES, no configured GPUs per node)."""

    name: str
    nodes: tuple[str, ...]
    capacity_gpus: int | None
    allocated_gpus: int | None
    pending_gpus: int | None
    pending_jobs: int
    running_jobs: int


@dataclass(frozen=True)
class SchedulerSnapshot:
    """What the collector serves from one successful poll."""

    pools: tuple[PoolStats, ...]
    node_states: tuple[tuple[str, str], ...]
    gpu_source: GpuSource


def gpu_source(state: ClusterState, gpus_per_node: int | None) -> GpuSource:
    """Where GPU figures come from for this cluster (see the module docstring)."""
    if any(node.gres_gpus > 0 for node in state.nodes):
        return "gres"
    return "configured" if gpus_per_node else "unknown"


def _allocated_whole_nodes(jobs: list[Job], gpus_per_node: int) -> int:
    named: set[str] = set()
    unnamed = 0
    for job in jobs:
        if job.nodes:
            named.update(job.nodes)
        else:
            unnamed += job.node_count
    return (len(named) + unnamed) * gpus_per_node


def summarise(state: ClusterState, gpus_per_node: int | None = None) -> SchedulerSnapshot:
    """Aggregate one poll into per-pool figures and node states."""
    source = gpu_source(state, gpus_per_node)
    names = list(dict.fromkeys([*state.partitions, *(p for n in state.nodes for p in n.partitions)]))
    members: dict[str, list[str]] = {name: [] for name in names}
    gres_capacity: dict[str, int] = dict.fromkeys(names, 0)
    for node in state.nodes:
        for part in node.partitions:
            members[part].append(node.name)
            gres_capacity[part] += node.gres_gpus
    active: dict[str, list[Job]] = {name: [] for name in names}
    pending: dict[str, list[Job]] = {name: [] for name in names}
    for job in state.jobs:
        bucket = active if job.active else pending if job.state == "PENDING" else None
        if bucket is not None:
            for part in job.partitions:
                if part in bucket:  # a partition that no longer exists is ignored
                    bucket[part].append(job)
    pools: list[PoolStats] = []
    for name in sorted(names):
        running = sum(job.count for job in active[name] if job.state == "RUNNING")
        pending_jobs = sum(job.count for job in pending[name])
        capacity: int | None
        allocated: int | None
        pending_gpus: int | None
        if source == "gres":
            capacity = gres_capacity[name]
            allocated = sum(job.gpus * job.count for job in active[name])
            pending_gpus = sum(job.gpus * job.count for job in pending[name])
        elif source == "configured" and gpus_per_node:
            capacity = len(members[name]) * gpus_per_node
            allocated = _allocated_whole_nodes(active[name], gpus_per_node)
            pending_gpus = sum(max(job.node_count, 1) * gpus_per_node * job.count for job in pending[name])
        else:
            capacity = allocated = pending_gpus = None
        pools.append(
            PoolStats(name, tuple(members[name]), capacity, allocated, pending_gpus, pending_jobs, running)
        )
    node_states = tuple(sorted((node.name, node.state) for node in state.nodes))
    return SchedulerSnapshot(tuple(pools), node_states, source)
