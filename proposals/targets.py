"""Change targets: the names the recommender writes and the scheduler hooks act on, and their values.

Every value is a string in the form the real tool takes, so `before` can be compared with what the hooks
read back from the live system. The helpers here parse and format them; both sides must use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

VLARB_HIGH = "opensm.vlarb_high"
VLARB_LOW = "opensm.vlarb_low"
SL2VL = "opensm.sl2vl"
PORT_GROUP_SL = "opensm.port_group.sl"
PARTITION_MEMBERS = "opensm.partition.members"
SLURM_NODES = "slurm.partition.nodes"

VLARB_FAMILIES = (VLARB_HIGH, VLARB_LOW)
FAMILIES = (VLARB_HIGH, VLARB_LOW, SL2VL, PORT_GROUP_SL, PARTITION_MEMBERS, SLURM_NODES)

MAX_DATA_VL = 14
MAX_WEIGHT = 255
MAX_SL = 15
MAX_VL = 15

_POOL = r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}"
_POOL_TARGETS = {
    re.compile(rf"^opensm\.port_group\.({_POOL})\.sl$"): PORT_GROUP_SL,
    re.compile(rf"^opensm\.partition\.({_POOL})\.members$"): PARTITION_MEMBERS,
    re.compile(rf"^slurm\.partition\.({_POOL})\.nodes$"): SLURM_NODES,
}
_NUMBER = r"(?:0|[1-9][0-9]{0,2})"
_VLARB_ENTRY = re.compile(rf"^({_NUMBER}):({_NUMBER})$")
_SMALL = re.compile(rf"^{_NUMBER}$")
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MEMBER = re.compile(r"^0x[0-9a-f]{16}(=full|=limited|=both)?$")


@dataclass(frozen=True)
class Target:
    """A parsed target name: its family and, for per-pool targets, the pool."""

    family: str
    pool: str | None = None

    @property
    def name(self) -> str:
        """The target's text form."""
        if self.pool is None:
            return self.family
        head, _, leaf = self.family.rpartition(".")
        return f"{head}.{self.pool}.{leaf}"


def parse_target(name: str) -> Target:
    """The target a name denotes; ValueError when the name follows no known convention."""
    if name in (VLARB_HIGH, VLARB_LOW, SL2VL):
        return Target(name)
    for pattern, family in _POOL_TARGETS.items():
        match = pattern.fullmatch(name)
        if match:
            return Target(family, match.group(1))
    raise ValueError(
        f"unknown target {name!r}; expected one of {VLARB_HIGH}, {VLARB_LOW}, {SL2VL}, "
        "opensm.port_group.<pool>.sl, opensm.partition.<pool>.members, slurm.partition.<pool>.nodes"
    )


def port_group_sl(pool: str) -> str:
    """The target naming a pool's QoS port-group service level."""
    return Target(PORT_GROUP_SL, pool).name


def partition_members(pool: str) -> str:
    """The target naming a pool's OpenSM partition membership."""
    return Target(PARTITION_MEMBERS, pool).name


def slurm_partition_nodes(pool: str) -> str:
    """The target naming a pool's Slurm partition node list."""
    return Target(SLURM_NODES, pool).name


def parse_vlarb(value: str) -> tuple[tuple[int, int], ...]:
    """`VL:weight,...` as (vl, weight) pairs in table order; ValueError on any fault."""
    if not value:
        raise ValueError("must list at least one VL:weight pair")
    pairs: list[tuple[int, int]] = []
    seen: set[int] = set()
    for entry in value.split(","):
        match = _VLARB_ENTRY.fullmatch(entry)
        if not match:
            raise ValueError(f"{entry!r} is not VL:weight (decimal, no spaces)")
        vl, weight = int(match.group(1)), int(match.group(2))
        if vl > MAX_DATA_VL:
            raise ValueError(f"VL {vl} is out of range 0-{MAX_DATA_VL}")
        if weight > MAX_WEIGHT:
            raise ValueError(f"weight {weight} of VL {vl} is out of range 0-{MAX_WEIGHT}")
        if vl in seen:
            raise ValueError(f"VL {vl} appears more than once")
        seen.add(vl)
        pairs.append((vl, weight))
    return tuple(pairs)


def format_vlarb(weights: Mapping[int, int] | Iterable[tuple[int, int]]) -> str:
    """The `VL:weight,...` text; a mapping is written in VL order, pairs in the order given."""
    pairs = sorted(weights.items()) if isinstance(weights, Mapping) else list(weights)
    return ",".join(f"{vl}:{weight}" for vl, weight in pairs)


def vl_weights(value: str) -> dict[int, int]:
    """Weight per VL of a `VL:weight,...` table (a VL not listed has weight 0)."""
    return dict(parse_vlarb(value))


def parse_sl2vl(value: str) -> tuple[int, ...]:
    """OpenSM's `qos_sl2vl`: 16 comma-separated VLs, one per SL 0-15; ValueError on any fault."""
    parts = value.split(",")
    if len(parts) != MAX_SL + 1:
        raise ValueError(f"must list {MAX_SL + 1} VLs (one per SL), got {len(parts)}")
    vls: list[int] = []
    for sl, part in enumerate(parts):
        if not _SMALL.fullmatch(part) or int(part) > MAX_VL:
            raise ValueError(f"VL of SL {sl} must be 0-{MAX_VL}, got {part!r}")
        vls.append(int(part))
    return tuple(vls)


def format_sl2vl(vls: Iterable[int]) -> str:
    """The `qos_sl2vl` text of 16 VLs."""
    return ",".join(str(vl) for vl in vls)


def parse_sl(value: str) -> int:
    """A service level 0-15 written in decimal; ValueError otherwise."""
    if not _SMALL.fullmatch(value) or int(value) > MAX_SL:
        raise ValueError(f"must be a service level 0-{MAX_SL}, got {value!r}")
    return int(value)


def node_sort_key(name: str) -> tuple[object, ...]:
    """Natural order: digit runs compare as numbers (node2 before node10), ties by text."""
    parts = re.split(r"([0-9]+)", name)
    return (*((int(part), part) if index % 2 else part for index, part in enumerate(parts)), name)


def sorted_nodes(nodes: Iterable[str]) -> list[str]:
    """Node names in natural order: the one order every list of nodes shown to an operator uses."""
    return sorted(nodes, key=node_sort_key)


def format_node_list(nodes: Iterable[str]) -> str:
    """The canonical node list: unique names in natural order, comma-separated (may be empty)."""
    return ",".join(sorted_nodes(set(nodes)))


def parse_node_list(value: str) -> tuple[str, ...]:
    """Node names of a canonical node list; ValueError when not valid, sorted and unique."""
    if not value:
        return ()
    nodes = tuple(value.split(","))
    for node in nodes:
        if not _NODE.fullmatch(node):
            raise ValueError(f"{node!r} is not a plain node name (no hostlist ranges, no spaces)")
    if format_node_list(nodes) != value:
        raise ValueError(f"must be unique names in natural sort order: {format_node_list(nodes)}")
    return nodes


def format_members(members: Iterable[str]) -> str:
    """The canonical partition member list: unique entries in text order, comma-separated."""
    return ",".join(sorted(set(members)))


def parse_members(value: str) -> tuple[str, ...]:
    """Port GUID members (`0x` + 16 lower-case hex digits, optional `=full|=limited|=both`)."""
    if not value:
        return ()
    members = tuple(value.split(","))
    for member in members:
        if not _MEMBER.fullmatch(member):
            raise ValueError(f"{member!r} is not a port GUID like 0x0002c90300000001[=full|=limited|=both]")
    if format_members(members) != value:
        raise ValueError(f"must be unique GUIDs in sorted order: {format_members(members)}")
    guids = [member_guid(member) for member in members]
    if len(set(guids)) != len(guids):
        raise ValueError("lists a port GUID more than once")
    return members


def member_guid(member: str) -> str:
    """The GUID of a partition member entry, without its membership suffix."""
    return member.partition("=")[0]


def check_value(target: Target, value: str) -> None:
    """Raise ValueError when `value` is not in the form the target's family takes."""
    if target.family in VLARB_FAMILIES:
        parse_vlarb(value)
    elif target.family == SL2VL:
        parse_sl2vl(value)
    elif target.family == PORT_GROUP_SL:
        parse_sl(value)
    elif target.family == PARTITION_MEMBERS:
        parse_members(value)
    else:
        parse_node_list(value)
