"""Parsers for what smpquery, saquery and ibnetdiscover print (infiniband-diags 44).

`smpquery vlarb` has one parser for the whole project, `foundation.vlarb`; this module wraps it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from foundation import vlarb
from foundation.vlarb import VlarbTables, table_cells

__all__ = [
    "ParseError",
    "PathRecord",
    "PortInfo",
    "VlarbTables",
    "parse_path_records",
    "parse_pkeys",
    "parse_ports_report",
    "parse_sl2vl",
    "parse_vlarb",
]

_SL2VL_ROW = re.compile(r"^ports:\s*in\s+(\d+),\s*out\s+(\d+):\s*(\|.*\|)\s*$")
_PKEY_ROW = re.compile(r"^\s*\d+:\s+((?:0x[0-9a-fA-F]{4}\s*)+)$")
_PR_FIELD = re.compile(r"^\s*(\w+)\.{2,}(\S+)\s*$")
_PORT_LINE = re.compile(
    r"^(CA|SW|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+(.*?)\s*"
    r"(?:-\s+(?:CA|SW|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s+\(\s*'(.*)'\s+-\s+'.*'\s*\)|'(.*)')\s*$"
)


class ParseError(ValueError):
    """A diagnostic printed something these parsers do not understand."""


def parse_vlarb(text: str) -> VlarbTables:
    """`smpquery vlarb LID PORT` (the shared parser, foundation.vlarb); ParseError on a fault."""
    try:
        return vlarb.parse_vlarb(text)
    except vlarb.VlarbParseError as exc:
        raise ParseError(str(exc)) from None


def parse_sl2vl(text: str) -> list[tuple[int, int, tuple[int, ...]]]:
    """`smpquery sl2vl LID PORT`: (in port, out port, VL for SL 0..15) per row."""
    rows: list[tuple[int, int, tuple[int, ...]]] = []
    for line in text.splitlines():
        match = _SL2VL_ROW.match(line.strip())
        if match:
            vls = tuple(int(c) for c in table_cells(match.group(3)))
            if len(vls) != 16:
                raise ParseError(f"SL2VL row with {len(vls)} entries: {line.strip()!r}")
            rows.append((int(match.group(1)), int(match.group(2)), vls))
    if not rows:
        raise ParseError("no 'ports: in N, out N:' rows in smpquery sl2vl output")
    return rows


def parse_pkeys(text: str) -> list[int]:
    """`smpquery pkeys LID PORT`: the non-zero P_Keys in table order (bit 15 = full membership)."""
    keys: list[int] = []
    rows = 0
    for line in text.splitlines():
        match = _PKEY_ROW.match(line)
        if match:
            rows += 1
            keys.extend(k for k in (int(v, 16) for v in match.group(1).split()) if k & 0x7FFF)
    if not rows:
        raise ParseError("no P_Key rows in smpquery pkeys output")
    return keys


@dataclass(frozen=True)
class PathRecord:
    """The fields of a PathRecord the adapter checks."""

    slid: int
    dlid: int
    sl: int
    pkey: int


def parse_path_records(text: str) -> list[PathRecord]:
    """`saquery -p`: every `PathRecord dump:` block (none when there is no path)."""
    records: list[PathRecord] = []
    fields: dict[str, str] = {}

    def flush() -> None:
        if fields:
            try:
                records.append(
                    PathRecord(
                        int(fields["slid"], 0),
                        int(fields["dlid"], 0),
                        int(fields["sl"], 0),
                        int(fields["pkey"], 0),
                    )
                )
            except (KeyError, ValueError) as exc:
                raise ParseError(f"incomplete PathRecord: {exc}") from exc
            fields.clear()

    for line in text.splitlines():
        if line.strip().startswith("PathRecord dump"):
            flush()
            continue
        match = _PR_FIELD.match(line)
        if match:
            fields[match.group(1)] = match.group(2)
    flush()
    return records


@dataclass(frozen=True)
class PortInfo:
    """One port from `ibnetdiscover -p`."""

    kind: str
    lid: int
    port: int
    guid: str
    description: str
    linked: bool


def parse_ports_report(text: str) -> list[PortInfo]:
    """`ibnetdiscover -p`: CA lines carry the port GUID, switch lines the switch's GUID."""
    ports: list[PortInfo] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _PORT_LINE.match(line.strip())
        if match is None:
            raise ParseError(f"cannot read ibnetdiscover -p line {line.strip()[:100]!r}")
        linked = match.group(6) is not None
        description = match.group(6) if linked else match.group(7)
        ports.append(
            PortInfo(
                match.group(1),
                int(match.group(2)),
                int(match.group(3)),
                f"0x{int(match.group(4), 16):016x}",
                description or "",
                linked,
            )
        )
    return ports
