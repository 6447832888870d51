"""The model's fabric as the fabric exporter's `SweepResult`, so its real `build_families` maps it.

What a sweep of the real fabric would find, built from `FabricView` instead of diagnostics: discovery
cannot reach an HCA over a down cable, counters merge as the real sweep merges them (the 64-bit extended
values win; `port_xmit_wait` is the saturating 32-bit one), a switch marked not answering reads as down,
VL arbitration follows the exporter's default `first` mode, and every answering switch has the forwarding
table the model routes by (`routing.switch_tables`, on the LIDs the sweep assigns; made again only when a
link changes state). A switch that does not answer keeps its last table, as the real sweep keeps its last
good read. In detail: docs/simulator.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace

from exporter.fabric.model import (
    Attribute,
    FabricNode,
    Link,
    NodeReading,
    PortKey,
    PortReading,
    PortState,
    RouteTable,
    SweepResult,
    Topology,
    VlarbReading,
    format_guid,
)
from exporter.fabric.rates import LANE_GBPS, rate_bytes_per_second
from foundation.ib_counters import PORT_COUNTERS
from foundation.vlarb import VlarbTables
from simulator.cluster.routing import Destination, switch_tables
from simulator.cluster.spec import VL_COUNT, QosSpec
from simulator.cluster.topology import Topology as ModelTopology
from simulator.cluster.views import FabricView, PortView
from simulator.serve.errors import RequestError

MAX_32 = (1 << 32) - 1
EXPECTED: frozenset[Attribute] = frozenset({"basic", "extended", "vl"})
# PortCounters fields (perfquery, no -x), by sysfs name; the data and packet ones are 32-bit there.
BASIC = tuple(c.sysfs for c in PORT_COUNTERS if c.basic)
# PortCountersExtended fields (perfquery -x): 64-bit, no PortXmitWait.
EXTENDED = tuple(c.sysfs for c in PORT_COUNTERS if c.extended)
_WIDTHS = (4, 1, 2, 8, 12)
ACTIVE = 4
NO_ANSWER = "no answer (simulated: management agent down)"


def link_width_speed(rate: float) -> tuple[int | None, str | None]:
    """The (lanes, speed name) whose signalling rate is `rate` bytes/s, or (None, None)."""
    for width in _WIDTHS:
        for speed in LANE_GBPS:
            if rate_bytes_per_second(width, speed) == round(rate):
                return width, speed
    return None, None


def port_reading(port: PortView) -> PortReading:
    """One port's counters as the real sweep merges basic, extended and per-VL reads."""
    counters = {name: min(port.counters.get(name, 0), MAX_32) for name in BASIC}
    counters.update({name: port.counters.get(name, 0) for name in EXTENDED})
    return PortReading(
        counters=counters,
        wide=set(EXTENDED),
        vl_wait=dict(enumerate(port.vl_xmit_wait)),
        attributes=set(EXPECTED),
    )


def _nodes(view: FabricView, ports: dict[int, list[PortView]]) -> dict[str, FabricNode]:
    """Switches (LIDs 1..) and reachable HCAs (LIDs after them), by formatted GUID. Every HCA port has a
    LID of its own whether reachable or not, so a cable going down renumbers nothing (OpenSM keeps a
    port's LID too)."""
    nodes: dict[str, FabricNode] = {}
    lid = 0
    for guid, desc in view.switches:
        lid += 1
        count = max((p.port for p in ports.get(guid, [])), default=0)
        nodes[format_guid(guid)] = FabricNode(format_guid(guid), "switch", desc, count, lid)
    for guid, own in ports.items():
        if own[0].kind != "hca":
            continue
        lids = {p.port: lid + i + 1 for i, p in enumerate(own)}
        lid += len(own)
        if not any(p.state_id == ACTIVE for p in own):
            continue
        port_guids = {p.port: format_guid(guid + p.port - 1) for p in own}
        text = format_guid(guid)
        nodes[text] = FabricNode(text, "ca", own[0].node_desc, len(own), None, lids, port_guids)
    return nodes


def sweep_result(
    view: FabricView,
    *,
    hca_ports: bool = False,
    unreachable: Collection[str] = (),
    finished_at: float | None = None,
    duration_seconds: float = 0.0,
    qos: QosSpec | None = None,
    tables: Mapping[str, Mapping[int, int]] | None = None,
) -> SweepResult:
    """The SweepResult a real sweep of this fabric would produce (docs/simulator.md has what it holds);
    `tables` are the switches' forwarding tables (`lid_tables`), None when the sweep reads none."""
    ports = _ports_by_node(view)
    nodes = _nodes(view, ports)
    width, speed = link_width_speed(view.ports[0].rate_bytes_per_second) if view.ports else (None, None)
    links: dict[PortKey, Link] = {}
    states: dict[PortKey, PortState] = {}
    readings: dict[str, NodeReading] = {}
    for node in nodes.values():
        own = ports.get(int(node.guid, 16), [])
        for port in own:
            key = (node.guid, port.port)
            states[key] = PortState(port.state_id, port.physical_state_id)
            if port.state_id == ACTIVE and port.remote_guid is not None and port.remote_port is not None:
                links[key] = Link(format_guid(port.remote_guid), port.remote_port, width, speed)
        if node.kind == "switch" or hca_ports:
            readings[node.guid] = _reading(node.guid, own, node.guid in unreachable)
    finished = time.time() if finished_at is None else finished_at
    routes, route_errors = _routes(nodes, tables, unreachable, finished)
    return SweepResult(
        topology=Topology(nodes, links),
        states=states,
        readings=readings,
        vanished={},
        finished_at=finished,
        duration_seconds=duration_seconds,
        vlarb=_vlarb(nodes.values(), links, unreachable, qos),
        routes=routes,
        route_errors=route_errors,
    )


def _ports_by_node(view: FabricView) -> dict[int, list[PortView]]:
    ports: dict[int, list[PortView]] = {}
    for port in view.ports:
        ports.setdefault(port.node_guid, []).append(port)
    return ports


def lid_tables(
    view: FabricView, tables: Mapping[int, Mapping[Destination, int]]
) -> dict[str, dict[int, int]]:
    """The model's routes (`routing.switch_tables`) as each switch's table on the LIDs a sweep of `view`
    assigns: destination LID -> out port, the switch's own LID -> 0; a destination without a LID (its link
    down) has no entry."""
    nodes = _nodes(view, _ports_by_node(view))
    lids = {
        (int(node.guid, 16), port): lid
        for node in nodes.values()
        if node.kind == "ca"
        for port, lid in node.port_lids.items()
    }
    out: dict[str, dict[int, int]] = {}
    for node in nodes.values():
        if node.kind == "switch" and node.lid is not None:
            own = tables.get(int(node.guid, 16), {})
            out[node.guid] = {lids[dest]: port for dest, port in own.items() if dest in lids}
            out[node.guid][node.lid] = 0
    return out


def _routes(
    nodes: Mapping[str, FabricNode],
    tables: Mapping[str, Mapping[int, int]] | None,
    unreachable: Collection[str],
    read_at: float,
) -> tuple[dict[str, RouteTable], dict[str, str]]:
    """Every answering switch's table, read now; why each other switch has none."""
    if tables is None:
        return {}, {}
    routes: dict[str, RouteTable] = {}
    errors: dict[str, str] = {}
    for node in nodes.values():
        if node.kind != "switch" or node.lid is None:
            continue
        if node.guid in unreachable:
            errors[node.guid] = NO_ANSWER
        elif node.guid in tables:
            routes[node.guid] = RouteTable(node.lid, tables[node.guid], read_at)
    return routes, errors


def _vlarb(
    nodes: Iterable[FabricNode], links: Collection[PortKey], unreachable: Collection[str], qos: QosSpec | None
) -> dict[PortKey, VlarbReading]:
    """The model's tables on the first linked port of every answering switch (none without `qos`)."""
    if qos is None:
        return {}
    tables = VlarbTables(tuple(qos.vlarb_low), tuple(qos.vlarb_high), VL_COUNT, VL_COUNT)
    out: dict[PortKey, VlarbReading] = {}
    for node in nodes:
        ports = sorted(port for guid, port in links if guid == node.guid)
        if node.kind == "switch" and ports and node.guid not in unreachable:
            out[(node.guid, ports[0])] = VlarbReading(tables)
    return out


def _reading(guid: str, ports: Iterable[PortView], silent: bool) -> NodeReading:
    if silent:
        return NodeReading(guid, False, EXPECTED, {}, (NO_ANSWER,))
    return NodeReading(guid, True, EXPECTED, {p.port: port_reading(p) for p in ports})


class SimulatedFabric:
    """A sweep source for `BackgroundSweeper`: each sweep reads the model's fabric view afresh; with the
    model's `topology`, the switches' forwarding tables too (made again only when a link changes state)."""

    def __init__(
        self,
        read_view: Callable[[], FabricView],
        hca_ports: bool = False,
        clock: Callable[[], float] = time.time,
        read_qos: Callable[[], QosSpec] | None = None,
        topology: ModelTopology | None = None,
    ) -> None:
        self._read_view = read_view
        self._read_qos = read_qos
        self._hca_ports = hca_ports
        self._clock = clock
        self._topology = topology
        self._lock = threading.Lock()
        self._unreachable: set[str] = set()
        self._switches: dict[str, str] = {}
        self._routes_lock = threading.Lock()
        self._tables: tuple[tuple[bool, ...], dict[str, dict[int, int]]] | None = None
        self._kept: dict[str, RouteTable] = {}

    def sweep(self) -> SweepResult:
        """One sweep of the model as it is now."""
        started = time.perf_counter()
        view = self._read_view()
        with self._lock:
            self._switches = {desc: format_guid(guid) for guid, desc in view.switches}
            silent = set(self._unreachable)
        qos = self._read_qos() if self._read_qos else None
        with self._routes_lock:
            tables = self._routing(view)
            result = sweep_result(
                view,
                hca_ports=self._hca_ports,
                unreachable=silent,
                finished_at=self._clock(),
                qos=qos,
                tables=tables,
            )
            # as the real sweep: a switch that does not answer keeps its last good table
            kept = {g: self._kept[g] for g in result.route_errors if g in self._kept}
            self._kept = {**kept, **result.routes}
        return replace(result, routes=dict(self._kept), duration_seconds=time.perf_counter() - started)

    def _routing(self, view: FabricView) -> dict[str, dict[int, int]] | None:
        """The switches' tables for this view: from the cache unless a link changed state (the LIDs follow
        from the link states too: an HCA whose link is down has none)."""
        if self._topology is None:
            return None
        if self._tables is None or self._tables[0] != view.link_up:
            model_tables = switch_tables(self._topology, view.link_up)
            self._tables = (view.link_up, lid_tables(view, model_tables))
        return self._tables[1]

    def set_answering(self, switch: str, answering: bool) -> str:
        """Make a switch (node description or GUID) stop or start answering; returns its GUID."""
        if not self._switches:
            self._switches = {desc: format_guid(guid) for guid, desc in self._read_view().switches}
        with self._lock:
            guid = self._switches.get(switch)
            if guid is None and switch in self._switches.values():
                guid = switch
            if guid is None:
                raise RequestError(f"unknown switch {switch!r}")
            if answering:
                self._unreachable.discard(guid)
            else:
                self._unreachable.add(guid)
            return guid
