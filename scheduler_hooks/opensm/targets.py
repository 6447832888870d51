"""Target names (`opensm.vlarb_high`, `opensm.port_group.<pool>.sl`, ...) and their value forms.

`read` returns every value in one canonical form, and every comparison uses it: VL arbitration tables
without their weight-0 entries, members sorted (a node name, or the port GUID of a port with none),
numbers in decimal. Every form: docs/apply.md ("The OpenSM side").
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PREFIX = "opensm."
MAX_VL = 14
MAX_SL = 15
MAX_WEIGHT = 255
MAX_VLARB_ENTRIES = 64
SL2VL_LENGTH = 16
MEMBERSHIPS = ("full", "limited", "both")

_POOL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_GUID = re.compile(r"0x[0-9a-fA-F]{1,16}")
_INT = re.compile(r"[0-9]{1,3}")


class Kind(enum.Enum):
    """What a target names."""

    VLARB_HIGH = "vlarb_high"
    VLARB_LOW = "vlarb_low"
    SL2VL = "sl2vl"
    GROUP_SL = "port_group_sl"
    GROUP_MEMBERS = "port_group_members"
    PARTITION_MEMBERS = "partition_members"


POOL_KINDS = (Kind.GROUP_SL, Kind.GROUP_MEMBERS, Kind.PARTITION_MEMBERS)
MEMBER_KINDS = (Kind.GROUP_MEMBERS, Kind.PARTITION_MEMBERS)
TABLE_KINDS = (Kind.VLARB_HIGH, Kind.VLARB_LOW, Kind.SL2VL)


@dataclass(frozen=True, order=True)
class Target:
    """A parsed target name."""

    kind: Kind
    pool: str = ""

    @property
    def name(self) -> str:
        """The target's name in the proposal format."""
        if self.kind is Kind.GROUP_SL:
            return f"{PREFIX}port_group.{self.pool}.sl"
        if self.kind is Kind.GROUP_MEMBERS:
            return f"{PREFIX}port_group.{self.pool}.members"
        if self.kind is Kind.PARTITION_MEMBERS:
            return f"{PREFIX}partition.{self.pool}.members"
        return f"{PREFIX}{self.kind.value}"

    def __str__(self) -> str:
        return self.name


class ValueFormatError(ValueError):
    """A value does not have its target's form; `problems` lists every fault."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def is_opensm_target(name: str) -> bool:
    """True for names this adapter owns (`opensm.` prefix)."""
    return name.startswith(PREFIX)


def parse_target(name: str) -> Target:
    """Parse a target name; ValueError names what is wrong."""
    if not name.startswith(PREFIX):
        raise ValueError(f"not an OpenSM target (no {PREFIX!r} prefix)")
    rest = name[len(PREFIX) :]
    for kind in TABLE_KINDS:
        if rest == kind.value:
            return Target(kind)
    suffixes = {
        ("port_group.", ".sl"): Kind.GROUP_SL,
        ("port_group.", ".members"): Kind.GROUP_MEMBERS,
        ("partition.", ".members"): Kind.PARTITION_MEMBERS,
    }
    for (head, tail), kind in suffixes.items():
        if rest.startswith(head) and rest.endswith(tail):
            pool = rest[len(head) : -len(tail)]
            if not _POOL.fullmatch(pool):
                raise ValueError(f"pool name {pool!r} is not [A-Za-z0-9][A-Za-z0-9_-]* (at most 64)")
            return Target(kind, pool)
    raise ValueError("unknown OpenSM target")


# --- VL arbitration --------------------------------------------------------------------------------


def parse_vlarb(text: str, max_vls: int = MAX_VL + 1) -> list[tuple[int, int]]:
    """Strictly parse `VL:weight,...`: VL 0-14 and below `max_vls`, weight 0-255, each VL once."""
    problems: list[str] = []
    entries: list[tuple[int, int]] = []
    stripped = text.strip()
    if not stripped:
        return entries
    seen: set[int] = set()
    parts = stripped.split(",")
    if len(parts) > MAX_VLARB_ENTRIES:
        problems.append(f"{len(parts)} entries, at most {MAX_VLARB_ENTRIES}")
    for number, part in enumerate(parts, 1):
        pair = part.strip().split(":")
        if len(pair) != 2 or not all(_INT.fullmatch(p.strip()) for p in pair):
            problems.append(f"entry {number} {part.strip()!r} is not VL:weight (decimal numbers)")
            continue
        vl, weight = int(pair[0]), int(pair[1])
        if vl > MAX_VL:
            problems.append(f"entry {number}: VL {vl} is out of range 0-{MAX_VL}")
        elif vl >= max_vls:
            problems.append(f"entry {number}: VL {vl} is not below qos_max_vls {max_vls}")
        if weight > MAX_WEIGHT:
            problems.append(f"entry {number}: weight {weight} is out of range 0-{MAX_WEIGHT}")
        if vl in seen:
            problems.append(f"entry {number}: VL {vl} appears twice")
        seen.add(vl)
        entries.append((vl, weight))
    if problems:
        raise ValueFormatError(problems)
    return entries


def format_vlarb(entries: Iterable[tuple[int, int]]) -> str:
    """Canonical text of a table: weight-0 entries dropped."""
    return ",".join(f"{vl}:{weight}" for vl, weight in entries if weight)


def render_vlarb(entries: Iterable[tuple[int, int]]) -> str:
    """The table as written to opensm.conf: every entry kept; an empty table is `0:0`."""
    return ",".join(f"{vl}:{weight}" for vl, weight in entries) or "0:0"


# --- SL to VL --------------------------------------------------------------------------------------


def parse_sl2vl(text: str, max_vls: int = MAX_VL + 1) -> list[int]:
    """Strictly parse 16 comma-separated VLs (0-14, below `max_vls`)."""
    parts = [p.strip() for p in text.strip().split(",")]
    problems: list[str] = []
    if len(parts) != SL2VL_LENGTH:
        problems.append(f"{len(parts)} entries, need {SL2VL_LENGTH} (one VL per SL)")
    vls: list[int] = []
    for sl, part in enumerate(parts):
        if not _INT.fullmatch(part):
            problems.append(f"SL {sl}: {part!r} is not a decimal VL")
            continue
        vl = int(part)
        if vl > MAX_VL:
            problems.append(f"SL {sl}: VL {vl} is out of range 0-{MAX_VL}")
        elif vl >= max_vls:
            problems.append(f"SL {sl}: VL {vl} is not below qos_max_vls {max_vls}")
        vls.append(vl)
    if problems:
        raise ValueFormatError(problems)
    return vls


def format_sl2vl(vls: Iterable[int]) -> str:
    """Canonical text of an SL-to-VL map."""
    return ",".join(str(vl) for vl in vls)


# --- service level ---------------------------------------------------------------------------------


def parse_sl(text: str) -> int:
    """A service level, decimal 0-15."""
    stripped = text.strip()
    if not _INT.fullmatch(stripped) or int(stripped) > MAX_SL:
        raise ValueFormatError([f"SL {text!r} is not a decimal number 0-{MAX_SL}"])
    return int(stripped)


# --- members ---------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Member:
    """One member token: a node name or a port GUID (normalised), with a membership."""

    ident: str
    membership: str = "full"

    @property
    def is_guid(self) -> bool:
        """True when `ident` is a port GUID."""
        return self.ident.startswith("0x")

    def text(self) -> str:
        """The canonical token."""
        return self.ident if self.membership == "full" else f"{self.ident}={self.membership}"


def normalise_guid(text: str) -> str:
    """`0x` + 16 lower-case hex digits."""
    return f"0x{int(text, 16):016x}"


def parse_members(text: str, memberships: bool = True) -> list[Member]:
    """Strictly parse a member list (names or GUIDs, each at most once, optional `=membership`)."""
    problems: list[str] = []
    members: list[Member] = []
    seen: set[str] = set()
    stripped = text.strip()
    if not stripped:
        return members
    for part in stripped.split(","):
        token = part.strip()
        ident, _, membership = token.partition("=")
        membership = membership or "full"
        if membership not in MEMBERSHIPS or (not memberships and membership != "full"):
            allowed = "full, limited or both" if memberships else "full only (port groups)"
            problems.append(f"member {token!r}: membership must be {allowed}")
            continue
        if _GUID.fullmatch(ident):
            ident = normalise_guid(ident)
        elif not _NAME.fullmatch(ident) or ident.lower().startswith("0x"):
            problems.append(f"member {token!r} is neither a node name nor a port GUID (0x + hex)")
            continue
        if ident in seen:
            problems.append(f"member {ident!r} appears twice")
        seen.add(ident)
        members.append(Member(ident, membership))
    if problems:
        raise ValueFormatError(problems)
    return members


def format_members(members: Iterable[Member]) -> str:
    """Canonical text of a member list."""
    return ",".join(sorted(m.text() for m in members))


def members_from_ports(ports: Mapping[str, str], names: Mapping[str, tuple[str, ...]]) -> list[Member]:
    """Fold port GUID -> membership into members: a node name where all its ports agree, else GUIDs."""
    left = dict(ports)
    members: list[Member] = []
    for name, guids in sorted(names.items()):
        if not guids or any(g not in left for g in guids):
            continue
        kinds = {left[g] for g in guids}
        if len(kinds) == 1:
            members.append(Member(name, kinds.pop()))
            for g in guids:
                del left[g]
    members.extend(Member(guid, membership) for guid, membership in left.items())
    return members


def canonical(target: Target, value: str, names: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """The canonical form of `value` for `target` (ValueFormatError when it is malformed).

    Member lists fold GUIDs into node names with `names` (node name -> port GUIDs) when given.
    """
    if target.kind in (Kind.VLARB_HIGH, Kind.VLARB_LOW):
        return format_vlarb(parse_vlarb(value))
    if target.kind is Kind.SL2VL:
        return format_sl2vl(parse_sl2vl(value))
    if target.kind is Kind.GROUP_SL:
        return str(parse_sl(value))
    members = parse_members(value, memberships=target.kind is Kind.PARTITION_MEMBERS)
    if names is None:
        return format_members(members)
    ports: dict[str, str] = {}
    for member in members:
        for guid in names.get(member.ident, (member.ident,)):
            ports[guid] = member.membership
    return format_members(members_from_ports(ports, names))
