"""Parse `ibroute -n LID` (a switch's unicast forwarding table, no destination lookups) into LID -> port.

A table is only taken whole: the header must name the switch asked for (LID and GUID) and the closing count
must be there and match the entries read, else the output is refused (a missing entry would hide a host's
route). A line that does not parse, or holds a LID outside 1-0xBFFF, a port beyond the switch's or a LID
listed twice, is skipped and counted; port 255 (no route) is left out of the table. The format, with an
example: docs/fabric-exporter.md, "What the parsers accept" (`ibroute -n LID`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.fabric.model import format_guid, number, valid_lid

_HEADER = re.compile(
    r"^Unicast lids \[0x[0-9a-fA-F]+-0x[0-9a-fA-F]+\] of switch"
    r" Lid (?P<lid>\d+) guid 0x(?P<guid>[0-9a-fA-F]{1,16})\b"
)
_COLUMNS = re.compile(r"^(?:Lid\s+Out\s+Destination|Port\s+Info)$")
_ENTRY = re.compile(r"^0x(?P<lid>[0-9a-fA-F]{1,4})\s+(?P<port>\d{1,3})(?:\s*:.*)?$")
_COUNT = re.compile(r"^(?P<count>\d+)\s+(?:valid\s+)?lids dumped$")
NO_ROUTE = 255


@dataclass
class ParsedRoutes:
    """The table read (destination LID -> out port), how many lines were skipped, and why the output is
    not one complete table of the switch asked for (None when it is)."""

    ports: dict[int, int] = field(default_factory=dict)
    skipped: int = 0
    error: str | None = None


def parse_ibroute(text: str, guid: str, lid: int, max_port: int) -> ParsedRoutes:
    """The forwarding table of switch `guid` at `lid` (ports 0..`max_port`), or why there is none."""
    parsed = ParsedRoutes()
    header: re.Match[str] | None = None
    entries = 0
    count: int | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _COLUMNS.match(line):
            continue
        if header is None and (found := _HEADER.match(line)) is not None:
            header = found
            continue
        if (closing := _COUNT.match(line)) is not None and count is None:
            count = number(closing.group("count"))
            continue
        entry = _ENTRY.match(line)
        if entry is None or header is None or count is not None:
            parsed.skipped += 1
            continue
        dest, port = int(entry.group("lid"), 16), number(entry.group("port"))
        if not valid_lid(dest) or dest in parsed.ports or not (0 <= port <= max_port or port == NO_ROUTE):
            parsed.skipped += 1
            continue
        entries += 1
        if port != NO_ROUTE:
            parsed.ports[dest] = port
    if header is None:
        parsed.error = "no forwarding table in the output"
    elif (number(header.group("lid")), format_guid(int(header.group("guid"), 16))) != (lid, guid):
        printed = f"LID {header.group('lid')} 0x{header.group('guid')}"
        parsed.error = f"the table printed is of {printed}, not of LID {lid} {guid}"
    elif count is None:
        parsed.error = "the table is cut short (no closing count)"
    elif count != entries:
        parsed.error = f"{entries} of the {count} entries listed were readable"
    return parsed
