"""Parse `perfquery` output (basic, `-x` extended, `--vlxmitcounters`) into counter blocks.

```
# Port counters: Lid 3 port 1 (CapMask: 0x1300)
SymbolErrorCounter:..............0
PortXmitWait:....................0
# Port extended counters: Lid 3 port 1 (CapMask: 0x1300 CapMask2: 0x0000000)
PortXmitData:....................23832
# PortVLXmitWaitCounters counters: Lid 3 port 1
PortVLXmitWait3:.................42
```

One process may print many blocks (`-l` loops over a switch's ports). Field names map onto the sysfs
counter names the catalog is keyed by. A garbled line is skipped and counted; an unknown attribute's
block is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from exporter.fabric.model import Attribute
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


def _field(block: _Open, name: str, value: int) -> None:
    if block.attribute == "vl":
        vl = _VL_FIELD.match(name)
        if vl is not None:
            block.vl_wait[int(vl.group("vl"))] = value
        return
    counter = COUNTER_FIELDS.get(name)
    if counter is not None:
        block.counters[counter] = value


def _value(text: str) -> int | None:
    try:
        value = int(text, 0)
    except ValueError:
        return None
    return value if value >= 0 else None


def parse_perfquery(text: str) -> tuple[list[CounterBlock], int]:
    """The blocks in `text` and how many lines were skipped as garbled."""
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
            title = " ".join(header.group("title").lower().split())
            attribute = _TITLES.get(title)
            current = _Open(attribute, int(header.group("lid")), int(header.group("port")), {}, {})
            continue
        field = _FIELD.match(line)
        value = _value(field.group("value")) if field is not None else None
        if current is None or field is None or value is None:
            skipped += 1
            continue
        _field(current, field.group("name"), value)
    if current is not None and (done := current.close()) is not None:
        blocks.append(done)
    return blocks, skipped
