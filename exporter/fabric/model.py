"""Plain data shared by the fabric parsers, the sweep and the metric mapping, and the ranges every
parsed number must lie in (a value outside them is garbage: its line is skipped and counted).

GUIDs are strings `0x` + 16 lower-case hex digits (the node side's format), ports are integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from foundation.vlarb import VlarbTables

NodeKind = Literal["switch", "ca", "router"]
Attribute = Literal["basic", "extended", "vl"]
PortKey = tuple[str, int]

MAX_PORT = 254  # port numbers 0-254 (0: a switch's management port; 255 selects all ports in a query)
MAX_LID = 0xBFFF  # unicast LIDs 1-0xBFFF; 0 is "not assigned yet"
MAX_GUID = (1 << 64) - 1
LINK_WIDTHS = frozenset({1, 2, 4, 8, 12})  # lanes of an IB link (1x, 2x, 4x, 8x, 12x)


def number(digits: str) -> int:
    """A decimal number of up to 20 digits (a 64-bit counter's most), else -1, which is out of every
    range; a 5,000-digit string never reaches int(), which refuses it."""
    return int(digits) if len(digits) <= 20 and digits.isascii() and digits.isdigit() else -1


def valid_guid(value: int) -> bool:
    """A GUID is 64 bits and never 0."""
    return 0 < value <= MAX_GUID


def valid_lid(value: int, unassigned: bool = False) -> bool:
    """A unicast LID (1-0xBFFF); with `unassigned`, 0 too."""
    return (0 if unassigned else 1) <= value <= MAX_LID


def format_guid(value: int) -> str:
    """A GUID as the metrics label it: `0x0002c90300a1b2c3`."""
    return f"0x{value:016x}"


@dataclass(frozen=True)
class FabricNode:
    """A switch, channel adapter or router found by discovery."""

    guid: str
    kind: NodeKind
    desc: str
    ports: int
    lid: int | None = None  # a switch's LID (port 0); CAs have one per port
    port_lids: Mapping[int, int] = field(default_factory=dict)
    port_guids: Mapping[int, str] = field(default_factory=dict)
    port_lmcs: Mapping[int, int] = field(default_factory=dict)  # CA port -> LMC (2**lmc LIDs from its own)

    def lid_of(self, port: int) -> int | None:
        """The LID that reaches `port` (a switch answers for all its ports on its own LID)."""
        lid = self.lid if self.kind == "switch" else self.port_lids.get(port)
        return lid or None

    def lids_of(self, port: int) -> range:
        """Every LID a CA port answers on: its base LID and the 2**lmc - 1 after it (empty without one)."""
        lid = self.port_lids.get(port) or 0
        return range(lid, lid + (1 << self.port_lmcs.get(port, 0))) if lid else range(0)


@dataclass(frozen=True)
class Link:
    """What one port is cabled to, with the link's width (lanes) and speed name when printed."""

    remote_guid: str
    remote_port: int
    width: int | None = None
    speed: str | None = None


@dataclass(frozen=True)
class Topology:
    """The discovered fabric: nodes by GUID and, per cabled port, its link."""

    nodes: Mapping[str, FabricNode] = field(default_factory=dict)
    links: Mapping[PortKey, Link] = field(default_factory=dict)

    @property
    def switches(self) -> list[FabricNode]:
        """The switches, by GUID."""
        return sorted((n for n in self.nodes.values() if n.kind == "switch"), key=lambda n: n.guid)

    @property
    def cas(self) -> list[FabricNode]:
        """The channel adapters, by GUID."""
        return sorted((n for n in self.nodes.values() if n.kind == "ca"), key=lambda n: n.guid)


@dataclass(frozen=True)
class PortState:
    """Logical and physical port state ids (IBA PortInfo numbering, as sysfs `state`/`phys_state`)."""

    state_id: int | None
    phys_state_id: int | None


@dataclass
class PortReading:
    """Counters read from one port in one sweep.

    `counters` are keyed by the sysfs counter names of `exporter.catalog.IB_COUNTERS` and hold raw
    values (data counters in 4-byte words); `wide` names the ones that came from a 64-bit attribute.
    """

    counters: dict[str, int] = field(default_factory=dict)
    wide: set[str] = field(default_factory=set)
    vl_wait: dict[int, int] = field(default_factory=dict)
    attributes: set[Attribute] = field(default_factory=set)
    read_at: float | None = None  # when the oldest of its attributes was read (the sweep's clock)


@dataclass(frozen=True)
class NodeReading:
    """The outcome of reading one node's counters: whether every command answered, and the values."""

    guid: str
    up: bool
    expected: frozenset[Attribute]
    ports: Mapping[int, PortReading] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    def port_complete(self, port: int) -> bool:
        """True when every expected attribute of `port` was read."""
        reading = self.ports.get(port)
        return reading is not None and self.expected <= reading.attributes


@dataclass(frozen=True)
class VlarbReading:
    """One port's VL arbitration tables from `smpquery vlarb`, or why they could not be read."""

    tables: VlarbTables | None
    error: str | None = None


@dataclass(frozen=True)
class RouteTable:
    """A switch's unicast forwarding table (`ibroute -n`): the out port per destination LID (port 0 is
    the switch itself), as read at `read_at` (the sweep's clock)."""

    lid: int
    ports: Mapping[int, int]
    read_at: float


@dataclass(frozen=True)
class SweepResult:
    """One complete sweep: topology, port states, counter readings and how the sweep went.

    `topology_at` is when the topology was discovered (the sweep's clock): None when in this sweep, an
    earlier time when discovery failed and the last good topology was used again.
    """

    topology: Topology
    states: Mapping[PortKey, PortState]
    readings: Mapping[str, NodeReading]
    vanished: Mapping[str, FabricNode]
    finished_at: float
    duration_seconds: float
    skipped_lines: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    vlarb: Mapping[PortKey, VlarbReading] = field(default_factory=dict)
    topology_at: float | None = None
    routes: Mapping[str, RouteTable] = field(default_factory=dict)  # the last good table per switch
    route_errors: Mapping[str, str] = field(default_factory=dict)  # why a switch's last read failed

    @property
    def topology_lag(self) -> float:
        """How much older than the sweep's end its topology is (0 when discovered in this sweep)."""
        return 0.0 if self.topology_at is None else max(0.0, self.finished_at - self.topology_at)

    @property
    def vlarb_failures(self) -> list[str]:
        """One line per port whose VL arbitration tables could not be read."""
        return [f"{guid}[{port}]: {r.error}" for (guid, port), r in sorted(self.vlarb.items()) if r.error]

    @property
    def route_failures(self) -> list[str]:
        """One line per switch whose forwarding table could not be read when last tried."""
        return [f"{guid}: {error}" for guid, error in sorted(self.route_errors.items())]
