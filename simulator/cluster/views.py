"""Read-side views of the model as plain frozen dataclasses (scheduler, fabric, jobs, HCA counters).

These are what the adapters serve: the scheduler exporter's adapter reads `SchedulerView`, the fabric
exporter's adapter reads `FabricView` (counter names as in sysfs and perfquery: data in 4-byte words,
32-bit `port_xmit_wait` saturating at 2^32-1), the recommender's fabric scenario reads `JobMetrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.cluster.fabric import COUNTER_MAX_32
from simulator.cluster.jobs import PENDING
from simulator.cluster.spec import VL_COUNT

if TYPE_CHECKING:
    from simulator.cluster.model import ClusterModel

# Counters every port shows; the ones the model does not drive stay 0.
PORT_COUNTERS = (
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "unicast_xmit_packets",
    "unicast_rcv_packets",
    "multicast_xmit_packets",
    "multicast_rcv_packets",
    "port_xmit_wait",
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)
_DRIVEN = {
    "port_xmit_data": "port_xmit_data",
    "port_rcv_data": "port_rcv_data",
    "port_xmit_packets": "port_xmit_packets",
    "port_rcv_packets": "port_rcv_packets",
    "unicast_xmit_packets": "port_xmit_packets",
    "unicast_rcv_packets": "port_rcv_packets",
    "port_xmit_wait": "port_xmit_wait",
    "symbol_error": "symbol_error",
    "link_downed": "link_downed",
}


@dataclass(frozen=True)
class PoolView:
    """One pool (Slurm partition) now."""

    name: str
    service_level: int
    vl: int
    nodes: tuple[str, ...]
    capacity_gpus: int  # GPUs of member nodes that are not down
    available_gpus: int  # of those, on nodes that take new work (not drained) and not lost
    allocated_gpus: int  # GPUs in use on member nodes (any pool's jobs, as sinfo counts them)
    running_gpus: int  # GPUs held by this pool's own running jobs
    pending_gpus: int  # GPUs asked for by this pool's pending jobs
    running_jobs: int
    pending_jobs: int


@dataclass(frozen=True)
class NodeView:
    """One node as Slurm shows it."""

    name: str
    state: str  # idle | mixed | allocated | draining | drained | down
    pools: tuple[str, ...]
    gpus: int
    allocated_gpus: int
    lost_gpus: tuple[int, ...]
    jobs: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class SchedulerView:
    """Every pool and node at model time `time` (seconds)."""

    time: float
    pools: Mapping[str, PoolView]
    nodes: Mapping[str, NodeView]


@dataclass(frozen=True)
class PortView:
    """One port with its counters (sysfs names) and its cable's far end."""

    node_guid: int
    port: int
    node_desc: str
    kind: str  # hca | leaf | spine
    node: str | None  # compute node of an HCA port
    state_id: int  # 4 ACTIVE, 1 DOWN
    physical_state_id: int  # 5 LinkUp, 3 Disabled
    rate_bytes_per_second: float
    counters: Mapping[str, int]
    vl_xmit_wait: tuple[int, ...]  # PortVLXmitWait, VL0..VL7 (32-bit, saturating)
    xmit_wait_ticks: int  # the wait ticks without saturation (what a reader that resets would sum)
    vl_xmit_wait_ticks: tuple[int, ...]  # the same per VL
    remote_guid: int | None
    remote_port: int | None
    remote_desc: str | None


@dataclass(frozen=True)
class ChannelView:
    """What one direction of a link carries now."""

    tx_desc: str
    tx_port: int
    rx_desc: str
    rx_port: int
    capacity_bytes_per_second: float
    rate_bytes_per_second: float
    offered_bytes_per_second: float
    wait_ratio: float
    vl_rates: Mapping[int, float]


@dataclass(frozen=True)
class FabricView:
    """Switches, ports (switch ports, and HCA ports when asked), the channels in use, every link's state."""

    time: float
    switches: tuple[tuple[int, str], ...]  # (node_guid, node_desc)
    ports: tuple[PortView, ...]
    channels: tuple[ChannelView, ...]
    link_up: tuple[bool, ...] = ()  # by link index (`Topology.links`): what the routes follow


@dataclass(frozen=True)
class JobMetrics:
    """A running job's pace and its share of the fabric."""

    job: int
    name: str
    pool: str
    gpus: int
    nodes: tuple[str, ...]
    vl: int
    iteration_seconds: float  # inf while stalled
    iteration_alone_seconds: float
    slowdown: float  # iteration_seconds / iteration_alone_seconds
    compute_fraction: float
    rate_bytes_per_second: float  # what each ring step gets
    demand_bytes_per_second: float  # what it would average on an idle fabric
    bottleneck: str | None  # the limiting port's name (`desc/port`), None when nothing limits it
    bottleneck_share: float  # its rate over the bottleneck link's capacity (or the first hop's)
    progress_seconds: float
    work_seconds: float
    start_time: float


@dataclass(frozen=True)
class HcaCounters:
    """One HCA port of a node: raw totals for syncing a `SimulatedNode`."""

    device: str
    rail: int
    link_up: bool
    xmit_bytes: int
    rcv_bytes: int
    xmit_wait: int  # ticks (saturates at 2^32-1)
    symbol_error: int
    link_downed: int
    saturated: frozenset[str]
    xmit_wait_ticks: int = 0  # the same ticks without saturation


def scheduler_view(model: ClusterModel) -> SchedulerView:
    """Build the scheduler view."""
    sched, names, jobs = model.scheduler, model.spec.nodes, model.jobs
    pools_of: dict[int, list[str]] = {}
    for pool in sched.pools.values():
        for n in pool.members:
            pools_of.setdefault(n, []).append(pool.name)
    nodes = {}
    for i, state in enumerate(sched.nodes):
        nodes[state.name] = NodeView(
            name=state.name,
            state=state.state,
            pools=tuple(pools_of.get(i, ())),
            gpus=len(state.slots),
            allocated_gpus=state.used,
            lost_gpus=tuple(sorted(state.lost)),
            jobs=tuple(sorted(state.jobs)),
            reason=state.reason,
        )
    pools = {}
    for pool in sched.pools.values():
        members = [sched.nodes[n] for n in pool.members]
        up = [m for m in members if not m.down]
        pending = [jobs[j] for j in pool.queue if jobs[j].state == PENDING]
        pools[pool.name] = PoolView(
            name=pool.name,
            service_level=model.pool_service_levels()[pool.name],
            vl=model.vl_of_pool(pool.name),
            nodes=tuple(names[n] for n in pool.members),
            capacity_gpus=sum(len(m.slots) for m in up),
            available_gpus=sum(len(m.slots) - len(m.lost) for m in up if m.usable),
            allocated_gpus=sum(m.used for m in members),
            running_gpus=sum(jobs[j].gpus for j in pool.running),
            pending_gpus=sum(j.gpus for j in pending),
            running_jobs=len(pool.running),
            pending_jobs=len(pending),
        )
    return SchedulerView(model.now, pools, nodes)


def port_view(model: ClusterModel, index: int) -> PortView:
    """One port's view."""
    topo, fabric = model.topology, model.fabric
    port = topo.ports[index]
    counters = {name: 0 for name in PORT_COUNTERS}
    for name, source in _DRIVEN.items():
        counters[name] = fabric.counter(index, source)
    per_vl = fabric.vl_wait.get(index)
    raw_vl = tuple(int(v) for v in per_vl) if per_vl else (0,) * VL_COUNT
    remote = topo.remote(index)
    far = topo.ports[remote] if remote >= 0 else None
    up = fabric.port_up(index)
    return PortView(
        node_guid=port.node_guid,
        port=port.number,
        node_desc=port.node_desc,
        kind=port.kind,
        node=port.node,
        state_id=4 if up else 1,
        physical_state_id=5 if up else 3,
        rate_bytes_per_second=topo.capacity,
        counters=counters,
        vl_xmit_wait=tuple(min(v, COUNTER_MAX_32) for v in raw_vl),
        xmit_wait_ticks=int(fabric.xmit_wait[index]),
        vl_xmit_wait_ticks=raw_vl,
        remote_guid=far.node_guid if far else None,
        remote_port=far.number if far else None,
        remote_desc=far.node_desc if far else None,
    )


def fabric_view(model: ClusterModel, include_hcas: bool = True) -> FabricView:
    """Build the fabric view."""
    topo = model.topology
    ports = tuple(port_view(model, p.index) for p in topo.ports if include_hcas or p.kind != "hca")
    channels = []
    for use in sorted(model.fabric.usage().values(), key=lambda u: u.channel):
        tx, rx = topo.ports[use.tx_port], topo.ports[use.rx_port]
        channels.append(
            ChannelView(
                tx_desc=tx.node_desc,
                tx_port=tx.number,
                rx_desc=rx.node_desc,
                rx_port=rx.number,
                capacity_bytes_per_second=topo.capacity,
                rate_bytes_per_second=use.rate,
                offered_bytes_per_second=use.offered,
                wait_ratio=use.wait_ratio,
                vl_rates=dict(use.vl_rates),
            )
        )
    return FabricView(
        model.now, tuple(topo.switch_guids), ports, tuple(channels), tuple(model.fabric.link_up)
    )


def job_metrics(model: ClusterModel, pool: str | None = None) -> list[JobMetrics]:
    """Metrics of running jobs (of one pool when `pool` is given), by job id."""
    out = []
    names = model.spec.nodes
    capacity = model.topology.capacity
    for job in sorted(model.running.values(), key=lambda j: j.id):
        if pool is not None and job.pool != pool:
            continue
        demand = job.flow_bytes / job.iteration_alone if job.distributed else 0.0
        bottleneck = None
        if job.bottleneck >= 0:
            tx, _ = model.topology.channel_ports(job.bottleneck)
            bottleneck = model.port_name(tx)
        out.append(
            JobMetrics(
                job=job.id,
                name=job.request.name,
                pool=job.pool,
                gpus=job.gpus,
                nodes=tuple(names[n] for n in job.nodes),
                vl=model.vl_of_pool(job.pool),
                iteration_seconds=job.iteration_time,
                iteration_alone_seconds=job.iteration_alone,
                slowdown=job.iteration_time / job.iteration_alone if job.iteration_alone else 1.0,
                compute_fraction=job.compute_fraction,
                rate_bytes_per_second=job.rate if job.distributed else 0.0,
                demand_bytes_per_second=demand,
                bottleneck=bottleneck,
                bottleneck_share=(job.rate / capacity) if job.distributed else 0.0,
                progress_seconds=job.progress,
                work_seconds=job.request.work_seconds,
                start_time=job.start_time if job.start_time is not None else 0.0,
            )
        )
    return out


def hca_counters(model: ClusterModel, index: int) -> HcaCounters:
    """Raw counters of one HCA port."""
    fabric = model.fabric
    port = model.topology.ports[index]
    saturated = frozenset(name for p, name in fabric.saturated if p == index)
    return HcaCounters(
        device=f"mlx5_{port.rail}",
        rail=port.rail,
        link_up=fabric.port_up(index),
        xmit_bytes=int(fabric.xmit_bytes[index]),
        rcv_bytes=int(fabric.rcv_bytes[index]),
        xmit_wait=fabric.counter(index, "port_xmit_wait"),
        symbol_error=fabric.symbol_error[index],
        link_downed=fabric.link_downed[index],
        saturated=saturated,
        xmit_wait_ticks=int(fabric.xmit_wait[index]),
    )
