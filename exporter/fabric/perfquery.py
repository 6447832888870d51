"""Parse `perfquery` output (basic, `-x` extended, `--vlxmitcounters`) into counter blocks.

    # Port counters: Lid 3 port 1 (CapMask: 0x1300)
    SymbolErrorCounter:..............0

One process may print many blocks (`-l` loops over a switch's ports); field names map onto the sysfs
counter names the catalog is keyed by. A garbled line, a value wider than its counter (`COUNTER_BITS`), a
VL outside 0-15 or a header out of range (with its lines) is skipped and counted; an unknown attribute's
block is ignored (every format: docs/fabric-exporter.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from exporter.fabric.model import MAX_PORT, Attribute, number, valid_lid
from foundation import ib_counters

_HEADER = re.compile(r"^#\s*(?P<title>[^:]+):\s*Lid\s+(?P<lid>\d+)\s+port\s+(?P<port>\d+)\b")
_FIELD = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*):\.*\s*(?P<value>\S+)$")
_VL_FIELD = re.compile(r"^PortVLXmitWait(?P<vl>\d+)$")
_TITLES: dict[str, Attribute] = {
    "port counters": "basic",
    "port extended counters": "extended",
    "portvlxmitwaitcounters counters": "vl",
}

# perfquery field (PortCounters and PortCountersExtended share names) -> sysfs counter name.
COUNTER_FIELDS: dict[str, str] = ib_counters.BY_PMA_FIELD


# Width in bits of each PortCounters field (the one counter table); every PortCountersExtended field
# is 64 bits wide, each PortVLXmitWait counter 16.
COUNTER_BITS: dict[str, int] = {
    c.pma: c.bits for c in ib_counters.PORT_COUNTERS if c.pma is not None and c.basic
}
EXTENDED_BITS = 64
VL_WAIT_BITS = 16
VL_COUNT = 16
QUERY_ALL_PORTS = 255  # a header may name the port selector perfquery was asked for


def fits(value: int, bits: int) -> bool:
    """True when `value` is a counter reading `bits` wide can hold."""
    return 0 <= value < (1 << bits)


@dataclass(frozen=True)
class CounterBlock:
    """One attribute of one port: sysfs-named counters, or per-VL waits keyed by VL."""

    attribute: Attribute
    lid: int
    port: int
    counters: Mapping[str, int]
    vl_wait: Mapping[int, int]


@dataclass
class _Open:
    attribute: Attribute | None
    lid: int
    port: int
    counters: dict[str, int]
    vl_wait: dict[int, int]

    def close(self) -> CounterBlock | None:
        """The finished block; None for an unknown attribute or a header with no values under it."""
        if self.attribute is None or not (self.counters or self.vl_wait):
            return None
        return CounterBlock(self.attribute, self.lid, self.port, self.counters, self.vl_wait)


def _field(block: _Open, name: str, value: int) -> bool:
    """Add one field to the block; False when its value (or VL) is out of range."""
    if block.attribute == "vl":
        vl = _VL_FIELD.match(name)
        if vl is not None:
            lane = number(vl.group("vl"))
            if not 0 <= lane < VL_COUNT or not fits(value, VL_WAIT_BITS):
                return False
            block.vl_wait[lane] = value
        return True
    counter = COUNTER_FIELDS.get(name)
    if counter is not None:
        bits = EXTENDED_BITS if block.attribute == "extended" else COUNTER_BITS.get(name, EXTENDED_BITS)
        if not fits(value, bits):
            return False
        block.counters[counter] = value
    return True


def _header(match: re.Match[str]) -> _Open | None:
    """The block a header opens; None when its LID or port is out of range."""
    lid, port = number(match.group("lid")), number(match.group("port"))
    if not valid_lid(lid) or not (0 <= port <= MAX_PORT or port == QUERY_ALL_PORTS):
        return None
    title = " ".join(match.group("title").lower().split())
    return _Open(_TITLES.get(title), lid, port, {}, {})


def _value(text: str) -> int | None:
    if len(text) > 24:  # wider than any 64-bit value in decimal or hex: garbage (and int() may refuse it)
        return None
    try:
        value = int(text, 0)
    except ValueError:
        return None
    return value if value >= 0 else None


def parse_perfquery(text: str) -> tuple[list[CounterBlock], int]:
    """The blocks in `text` and how many lines were skipped as garbled or out of range."""
    blocks: list[CounterBlock] = []
    skipped = 0
    current: _Open | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        header = _HEADER.match(line)
        if header is not None:
            if current is not None and (done := current.close()) is not None:
                blocks.append(done)
            current = _header(header)
            skipped += current is None
            continue
        field = _FIELD.match(line)
        value = _value(field.group("value")) if field is not None else None
        if (
            current is None
            or field is None
            or value is None
            or not _field(current, field.group("name"), value)
        ):
            skipped += 1
    if current is not None and (done := current.close()) is not None:
        blocks.append(done)
    return blocks, skipped
