"""The quota policy's view of a model: signals from port and per-VL counters, as Prometheus would see them.

Between two snapshots the counters the exporters expose give what the recording rules compute: per port
(HCA and switch) the wait share `rate(PortXmitWait) * tick bytes / link rate`, the utilization
`rate(PortXmitData) / link rate`, the same wait share per VL (every VL of a switch port, 0 where it did not
wait, as the fabric exporter serves a series per port and VL); the switch cabling as `ibpool_fabric_link_info`
has it; pools, node states and each node's GPU utilization as the scheduler and node exporters report them;
the QoS tables as OpenSM has them; the switches' forwarding tables as `ibpool_fabric_port_route_info`
has them (`simulator.cluster.routing`: the model's own routes, which hosts leave each switch port). No
flow, demand or bottleneck of the model goes into the signals: the policy sees what a live recommender
would. The text exposition is skipped (`recommender.signals.assemble`
makes the snapshot from the same readings the embedded source would parse out of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.fabric.model import format_guid
from recommender.signals.assemble import assemble
from recommender.signals.model import QosSignals, Signals
from recommender.signals.raw import LinkInfo, PortReading, RawData
from simulator.cluster.model import ClusterModel
from simulator.cluster.routing import forwarding
from simulator.cluster.spec import VL_COUNT

SOURCE = "counters"


@dataclass(frozen=True)
class Snapshot:
    """The fabric's raw counters at model time `at`."""

    at: float
    xmit_bytes: tuple[float, ...]
    xmit_wait: tuple[float, ...]
    vl_wait: dict[int, tuple[float, ...]]


def snapshot(model: ClusterModel) -> Snapshot:
    """Copy the counters now."""
    fabric = model.fabric
    return Snapshot(
        model.now,
        tuple(fabric.xmit_bytes),
        tuple(fabric.xmit_wait),
        {port: tuple(values) for port, values in fabric.vl_wait.items()},
    )


def _links(model: ClusterModel) -> tuple[list[LinkInfo], set[str]]:
    topo = model.topology
    links = []
    for port in topo.ports:
        far = topo.remote(port.index)
        if port.kind == "hca" or far < 0:
            continue
        other = topo.ports[far]
        links.append(
            LinkInfo(
                format_guid(port.node_guid),
                str(port.number),
                port.node_desc,
                format_guid(other.node_guid),
                str(other.number),
                other.node_desc,
            )
        )
    return links, {format_guid(guid) for guid, _ in topo.switch_guids}


def signals(model: ClusterModel, before: Snapshot, start_unix: float = 1.7e9) -> Signals:
    """The signals over [before.at, now] (the rate window is the time between the snapshots)."""
    after = snapshot(model)
    window = after.at - before.at
    if window <= 0:
        raise ValueError("signals need two snapshots apart in time")
    raw = RawData()
    view = model.scheduler_view()
    for name, pool in view.pools.items():
        raw.pool_capacity[name] = float(pool.capacity_gpus)
        raw.pool_allocated[name] = float(pool.allocated_gpus)
        raw.pool_pending[name] = float(pool.pending_gpus)
        raw.pool_nodes[name] = set(pool.nodes)
    busy: dict[str, list[float]] = {}
    for name, node in view.nodes.items():
        raw.node_state[name] = node.state
        busy[name] = [g.utilization for g in model.node_load(name).gpus]
        raw.node_utilization[name] = sum(busy[name]) / len(busy[name])
    for name, members in raw.pool_nodes.items():
        values = [u for n in members for u in busy.get(n, [])]
        if values:
            raw.pool_utilization[name] = sum(values) / len(values)
    topo, fabric = model.topology, model.fabric
    tick, capacity = fabric.tick_bytes, topo.capacity
    for port in topo.ports:
        if not fabric.port_up(port.index):
            continue
        i = port.index
        sent = (after.xmit_bytes[i] - before.xmit_bytes[i]) / window
        waited = (after.xmit_wait[i] - before.xmit_wait[i]) / window
        hca = port.kind == "hca"
        vls: dict[int, float] = {} if hca else dict.fromkeys(range(VL_COUNT), 0.0)
        for vl, value in enumerate(after.vl_wait.get(i, ())):
            earlier = before.vl_wait.get(i, (0.0,) * (vl + 1))[vl]
            vls[vl] = (value - earlier) / window * tick / capacity
        raw.ports.append(
            PortReading(
                kind="hca" if hca else "fabric",
                owner=(port.node or "") if hca else format_guid(port.node_guid),
                device=f"mlx5_{port.rail}" if hca else port.node_desc,
                port=str(port.number),
                congestion=waited * tick / capacity,
                utilization=sent / capacity,
                saturated=False,
                vl_congestion={vl: v for vl, v in vls.items() if v > 0 or not hca},
                rate_bytes_per_second=capacity,
            )
        )
    raw.links, raw.switches = _links(model)
    raw.routes = forwarding(topo, fabric.link_up)
    raw.ages = {"pools": 0.0, "nodes": 0.0, "links": 0.0}
    qos = model.qos()
    tables = QosSignals(
        ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_high),
        ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_low),
        tuple(qos.sl2vl),
        model.pool_service_levels(),
        0.0,
    )
    return assemble(
        raw,
        taken_at=start_unix + model.now,
        window_seconds=window,
        source=SOURCE,
        max_age_seconds=3600.0,
        qos=tables,
    )
