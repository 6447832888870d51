"""Maps a SweepResult to the `ibpool_fabric_*` metric families of the catalog (and does nothing else).

Port metrics cover every port of every switch (and of every CA when HCA ports are read); data counters
are multiplied exactly as the node side does (catalog.IB_COUNTERS); a counter read from the 32-bit
PortCounters attribute gets a saturation flag; unreadable values are omitted, never exported as 0.
A port's counters carry their age as of the sweep's end (`ibpool_fabric_port_counters_age_seconds`; the
collector ages it to the scrape). VL arbitration weights (`ibpool_vl_weight{source="live"}`) come from
the ports whose tables were read. How the sweep went (timestamp, duration, topology age) is served by
`collector.FabricStatusCollector`. Forwarding tables become one `ibpool_fabric_port_route_info` per
port of every switch with a table: the hosts (first word of the CA's node description, after the name
map) whose LIDs leave through it, as a host list; with their read success and age per switch.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import lru_cache

from exporter import catalog
from exporter.fabric.model import FabricNode, NodeReading, PortReading, SweepResult
from exporter.fabric.names import NameMap
from exporter.fabric.rates import rate_bytes_per_second
from foundation.exposition import MetricFamily
from foundation.hostlist import compress_hostlist
from foundation.vlarb import weights_by_vl

SATURATED_32 = (1 << 32) - 1
_MULTIPLIER = {name: multiplier for name, (_, multiplier) in catalog.IB_COUNTERS.items()}


@lru_cache(maxsize=1 << 16)
def _listable(host: str) -> bool:
    """Whether a host list can hold `host` (checked once per name)."""
    try:
        compress_hostlist([host])
    except ValueError:
        return False
    return True


_HostKey = tuple[tuple[int, str], ...]  # the LID -> host map, sorted


class _PortLists:
    """Per switch, the host list of each port as last built, reused while the switch's table (the same
    `ports` mapping, held here so its id stays its own), its port count and the LID -> host map are
    unchanged: a table is read every few minutes, the families are built every sweep."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, tuple[Mapping[int, int], int, _HostKey, list[tuple[int, str]]]] = {}

    def get(
        self, switch: FabricNode, ports: Mapping[int, int], hosts: dict[int, str], key: _HostKey
    ) -> list[tuple[int, str]]:
        """(port, host list) for every port of `switch`."""
        with self._lock:
            found = self._made.get(switch.guid)
        if found is not None and found[0] is ports and found[1] == switch.ports and found[2] == key:
            return found[3]
        leaving: dict[int, set[str]] = {port: set() for port in range(1, switch.ports + 1)}
        for lid, port in ports.items():
            host = hosts.get(lid)
            if host is not None and port in leaving:
                leaving[port].add(host)
        made = [(port, compress_hostlist(names)) for port, names in leaving.items()]
        with self._lock:
            self._made[switch.guid] = (ports, switch.ports, key, made)
        return made


_PORT_LISTS = _PortLists()


class _Families:
    """The families of one sweep, created up front so every sweep exposes the same set."""

    def __init__(self) -> None:
        self.counters = {name: MetricFamily(spec) for name, spec in catalog.FABRIC_COUNTERS.items()}
        self.saturated = MetricFamily(catalog.FABRIC_COUNTER_SATURATED)
        self.vl_wait = MetricFamily(catalog.FABRIC_VL_TRANSMIT_WAIT)
        self.state = MetricFamily(catalog.FABRIC_STATE_ID)
        self.phys_state = MetricFamily(catalog.FABRIC_PHYSICAL_STATE_ID)
        self.rate = MetricFamily(catalog.FABRIC_RATE)
        self.width = MetricFamily(catalog.FABRIC_LINK_WIDTH)
        self.port_up = MetricFamily(catalog.FABRIC_PORT_UP)
        self.link_info = MetricFamily(catalog.FABRIC_LINK_INFO)
        self.switch_up = MetricFamily(catalog.FABRIC_SWITCH_UP)
        self.vlarb_up = MetricFamily(catalog.FABRIC_VLARB_UP)
        self.vl_weight = MetricFamily(catalog.VL_WEIGHT)
        self.counters_age = MetricFamily(catalog.FABRIC_PORT_COUNTERS_AGE)
        self.route_info = MetricFamily(catalog.FABRIC_PORT_ROUTE_INFO)
        self.routes_up = MetricFamily(catalog.FABRIC_ROUTES_UP)
        self.routes_age = MetricFamily(catalog.FABRIC_ROUTES_AGE)

    def all(self) -> list[MetricFamily]:
        """Every family, counters first."""
        fixed = [
            self.saturated,
            self.vl_wait,
            self.state,
            self.phys_state,
            self.rate,
            self.width,
            self.port_up,
            self.link_info,
            self.switch_up,
            self.vlarb_up,
            self.vl_weight,
            self.counters_age,
            self.route_info,
            self.routes_up,
            self.routes_age,
        ]
        return [*self.counters.values(), *fixed]


def build_families(
    result: SweepResult, names: NameMap, hca_ports: bool = False, vl_count: int = 16
) -> list[MetricFamily]:
    """Every fabric family for `result`; `vl_count` limits per-VL waits to VLs 0..vl_count-1."""
    builder = _Builder(result, names, vl_count)
    topology = result.topology
    for node in topology.switches + (topology.cas if hca_ports else []):
        builder.node(node)
    for node in sorted(result.vanished.values(), key=lambda n: n.guid):
        builder.vanished(node)
    builder.vlarb()
    builder.routes()
    return builder.out.all()


class _Builder:
    """Adds one sweep's samples to a fresh set of families."""

    def __init__(self, result: SweepResult, names: NameMap, vl_count: int) -> None:
        self.out = _Families()
        self._result = result
        self._names = names
        self._vl_count = vl_count

    def node(self, node: FabricNode) -> None:
        """Switch liveness and every port of `node`."""
        desc = self._names.name(node.guid, node.desc)
        reading = self._result.readings.get(node.guid)
        if node.kind == "switch":
            self.out.switch_up.add((node.guid, desc), 1 if reading is not None and reading.up else 0)
        for port in range(1, node.ports + 1):
            self._port((node.guid, str(port), desc), port, reading)

    def vanished(self, node: FabricNode) -> None:
        """A switch seen in an earlier sweep but not in this one: down, every port unread."""
        desc = self._names.name(node.guid, node.desc)
        self.out.switch_up.add((node.guid, desc), 0)
        for port in range(1, node.ports + 1):
            self.out.port_up.add((node.guid, str(port), desc), 0)

    def vlarb(self) -> None:
        """Read success and live weights of every port whose VL arbitration tables were read."""
        out, result = self.out, self._result
        for (guid, port), reading in sorted(result.vlarb.items()):
            node = result.topology.nodes.get(guid)
            labels = (guid, str(port), self._names.name(guid, node.desc if node else ""))
            out.vlarb_up.add(labels, 0 if reading.tables is None else 1)
            if reading.tables is None:
                continue
            for table, entries in (("high", reading.tables.high), ("low", reading.tables.low)):
                for vl, weight in weights_by_vl(entries).items():
                    out.vl_weight.add((*labels, table, str(vl), "live"), weight)

    def routes(self) -> None:
        """Per switch with a forwarding table: the hosts leaving through each port, read success, age."""
        out, result = self.out, self._result
        hosts = self._hosts_by_lid()
        key = tuple(sorted(hosts.items()))
        for switch in result.topology.switches:
            labels = (switch.guid, self._names.name(switch.guid, switch.desc))
            table = result.routes.get(switch.guid)
            if table is not None or switch.guid in result.route_errors:
                out.routes_up.add(labels, 0 if switch.guid in result.route_errors else 1)
            if table is None:
                continue
            out.routes_age.add(labels, max(0.0, result.finished_at - table.read_at))
            for port, listed in _PORT_LISTS.get(switch, table.ports, hosts, key):
                out.route_info.add_info((labels[0], str(port), labels[1], listed))

    def _hosts_by_lid(self) -> dict[int, str]:
        """Every CA LID (each port's base LID and its LMC range) -> the host: the first word of the CA's
        node description after the name map; a name a host list cannot hold is left out."""
        hosts: dict[int, str] = {}
        for ca in self._result.topology.cas:
            host = self._names.name(ca.guid, ca.desc).split(" ", 1)[0]
            if not _listable(host):
                continue
            for port in ca.port_lids:
                hosts.update(dict.fromkeys(ca.lids_of(port), host))
        return hosts

    def _port(self, labels: tuple[str, str, str], port: int, reading: NodeReading | None) -> None:
        out, result = self.out, self._result
        key = (labels[0], port)
        state = result.states.get(key)
        if state is not None and state.state_id is not None:
            out.state.add(labels, state.state_id)
        if state is not None and state.phys_state_id is not None:
            out.phys_state.add(labels, state.phys_state_id)
        link = result.topology.links.get(key)
        if link is not None:
            remote = result.topology.nodes.get(link.remote_guid)
            remote_desc = self._names.name(link.remote_guid, remote.desc if remote else "")
            out.link_info.add_info((*labels, link.remote_guid, str(link.remote_port), remote_desc))
            rate = rate_bytes_per_second(link.width, link.speed)
            if rate is not None:
                out.rate.add(labels, rate)
            if link.width is not None:
                out.width.add(labels, link.width)
        out.port_up.add(labels, 1 if reading is not None and reading.port_complete(port) else 0)
        counters = reading.ports.get(port) if reading is not None else None
        if counters is not None:
            self._counters(labels, counters)

    def _counters(self, labels: tuple[str, str, str], reading: PortReading) -> None:
        out = self.out
        read_at = self._result.finished_at if reading.read_at is None else reading.read_at
        out.counters_age.add(labels, max(0.0, self._result.finished_at - read_at))
        for name, value in reading.counters.items():
            family = out.counters.get(name)
            if family is None:
                continue
            family.add(labels, value * _MULTIPLIER[name])
            if name in catalog.IB_32BIT_COUNTERS and name not in reading.wide:
                out.saturated.add((*labels, name), 1 if value == SATURATED_32 else 0)
        for vl, value in sorted(reading.vl_wait.items()):
            if vl < self._vl_count:
                out.vl_wait.add((*labels, str(vl)), value)
