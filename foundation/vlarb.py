"""The one parser of `smpquery vlarb LID PORT` (infiniband-diags 44), and weights per VL.

Shared by the fabric exporter (live weights) and the OpenSM hook (verifying applied weights). VLs and
weights print as hex (weights upper-case: `0xC8`), one VL row and one WEIGHT row per 8 entries of each
table; a switch's port 0 (`# No VLArbitration tables (BSP0)`) is an error here. An example of the output:
docs/fabric-exporter.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# VLs every weight map covers (0 when not in the table), so live and desired series line up per VL.
BASE_VLS = range(8)

_HEAD = re.compile(r"LowCap\s+(\d+)\s+HighCap\s+(\d+)")
_CELLS = re.compile(r"\|\s*([^|]*?)\s*(?=\|)")


class VlarbParseError(ValueError):
    """`smpquery vlarb` printed something this parser does not understand."""


@dataclass(frozen=True)
class VlarbTables:
    """Both VL arbitration tables of one port, entries in table order, and the port's capacities."""

    low: tuple[tuple[int, int], ...]
    high: tuple[tuple[int, int], ...]
    low_cap: int
    high_cap: int


def table_cells(line: str) -> list[str]:
    """The non-empty `|`-separated cells of a diagnostic's table row (text after the first `|`)."""
    return [c for c in _CELLS.findall(line[line.index("|") :] + "|") if c != ""]


def parse_vlarb(text: str) -> VlarbTables:
    """Both tables of `smpquery vlarb LID PORT`; VlarbParseError on anything else."""
    head = _HEAD.search(text)
    if head is None:
        raise VlarbParseError("no 'LowCap N HighCap N' header in smpquery vlarb output")
    tables: dict[str, list[tuple[int, int]]] = {"low": [], "high": []}
    current: str | None = None
    vls: list[int] = []
    for line in text.splitlines():
        lower = line.lower()
        if lower.startswith("#") and "low priority" in lower:
            current = "low"
        elif lower.startswith("#") and "high priority" in lower:
            current = "high"
        elif line.startswith("VL") and current is not None:
            vls = _hex_cells(line)
        elif line.startswith("WEIGHT") and current is not None:
            weights = _hex_cells(line)
            if len(weights) != len(vls):
                raise VlarbParseError(f"{len(vls)} VLs but {len(weights)} weights in the {current} table")
            tables[current].extend(zip(vls, weights, strict=True))
            vls = []
    low_cap, high_cap = int(head.group(1)), int(head.group(2))
    for name, cap in (("low", low_cap), ("high", high_cap)):
        if cap and not tables[name]:
            raise VlarbParseError(f"no rows for the {name} table (capacity {cap}): output cut short?")
    return VlarbTables(tuple(tables["low"]), tuple(tables["high"]), low_cap, high_cap)


def _hex_cells(line: str) -> list[int]:
    try:
        return [int(c, 16) for c in table_cells(line)]
    except ValueError:
        raise VlarbParseError(f"not hex numbers: {line.strip()[:100]!r}") from None


def weights_by_vl(entries: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Total weight per VL of a table's entries: VLs 0-7 always (0 if absent), others where listed.

    The arbiter serves a VL once per entry, so a VL listed twice gets the sum of both weights.
    """
    out = dict.fromkeys(BASE_VLS, 0)
    for vl, weight in entries:
        out[vl] = out.get(vl, 0) + weight
    return dict(sorted(out.items()))
