"""The model's fabric as the fabric exporter's `SweepResult`, so its real `build_families` maps it.

What a sweep of the real fabric would find, built from `FabricView` instead of diagnostics: discovery
cannot reach an HCA over a down cable, counters merge as the real sweep merges them (the 64-bit extended
values win; `port_xmit_wait` is the saturating 32-bit one), a switch marked not answering reads as down,
and VL arbitration follows the exporter's default `first` mode. In detail: docs/simulator.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace

from exporter.fabric.model import (
    Attribute,
    FabricNode,
    Link,
    NodeReading,
    PortKey,
    PortReading,
    PortState,
    SweepResult,
    Topology,
    VlarbReading,
    format_guid,
)
from exporter.fabric.rates import LANE_GBPS, rate_bytes_per_second
from foundation.ib_counters import PORT_COUNTERS
from foundation.vlarb import VlarbTables
from simulator.cluster.spec import VL_COUNT, QosSpec
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
    """Switches (LIDs 1..) and reachable HCAs (LIDs after them), by formatted GUID."""
    nodes: dict[str, FabricNode] = {}
    lid = 0
    for guid, desc in view.switches:
        lid += 1
        count = max((p.port for p in ports.get(guid, [])), default=0)
        nodes[format_guid(guid)] = FabricNode(format_guid(guid), "switch", desc, count, lid)
    for guid, own in ports.items():
        if own[0].kind != "hca" or not any(p.state_id == ACTIVE for p in own):
            continue
        lids = {p.port: lid + i + 1 for i, p in enumerate(own)}
        lid += len(own)
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
) -> SweepResult:
    """The SweepResult a real sweep of this fabric would produce (docs/simulator.md has what it holds)."""
    ports: dict[int, list[PortView]] = {}
    for port in view.ports:
        ports.setdefault(port.node_guid, []).append(port)
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
    return SweepResult(
        topology=Topology(nodes, links),
        states=states,
        readings=readings,
        vanished={},
        finished_at=time.time() if finished_at is None else finished_at,
        duration_seconds=duration_seconds,
        vlarb=_vlarb(nodes.values(), links, unreachable, qos),
    )


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
        return NodeReading(guid, False, EXPECTED, {}, ("no answer (simulated: management agent down)",))
    return NodeReading(guid, True, EXPECTED, {p.port: port_reading(p) for p in ports})


class SimulatedFabric:
    """A sweep source for `BackgroundSweeper`: each sweep reads the model's fabric view afresh."""

    def __init__(
        self,
        read_view: Callable[[], FabricView],
        hca_ports: bool = False,
        clock: Callable[[], float] = time.time,
        read_qos: Callable[[], QosSpec] | None = None,
    ) -> None:
        self._read_view = read_view
        self._read_qos = read_qos
        self._hca_ports = hca_ports
        self._clock = clock
        self._lock = threading.Lock()
        self._unreachable: set[str] = set()
        self._switches: dict[str, str] = {}

    def sweep(self) -> SweepResult:
        """One sweep of the model as it is now."""
        started = time.perf_counter()
        view = self._read_view()
        with self._lock:
            self._switches = {desc: format_guid(guid) for guid, desc in view.switches}
            silent = set(self._unreachable)
        qos = self._read_qos() if self._read_qos else None
        result = sweep_result(
            view, hca_ports=self._hca_ports, unreachable=silent, finished_at=self._clock(), qos=qos
        )
        return replace(result, duration_seconds=time.perf_counter() - started)

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
