"""The shared `smpquery vlarb` parser (captured ibsim + OpenSM output) and weights per VL."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation.vlarb import VlarbParseError, VlarbTables, parse_vlarb, weights_by_vl
from scheduler_hooks.opensm import parse as hook_parse
from tests.exporter.fabric.helpers import data

HOOK_DATA = Path(__file__).resolve().parents[1] / "scheduler_hooks" / "opensm" / "data"
BASELINE_LOW = ((0, 0), (1, 64), (2, 32), (3, 16), (4, 8), (5, 4), (6, 2), (7, 1))
BASELINE_HIGH = ((0, 4), *((vl, 0) for vl in range(1, 8)))


def test_switch_port_as_opensm_programmed_it() -> None:
    tables = parse_vlarb(data("smpquery_vlarb_switch.txt"))
    assert tables == VlarbTables(BASELINE_LOW, BASELINE_HIGH, 8, 8)


def test_uncabled_port_keeps_the_simulators_default() -> None:
    tables = parse_vlarb(data("smpquery_vlarb_unprogrammed.txt"))
    assert tables.low == ((0, 0), *((vl, 4) for vl in range(1, 8)))


def test_upper_case_hex_and_repeated_vls() -> None:
    """OpenSM's mangled table (hook capture): weights like 0xC8, VL 0 listed several times."""
    tables = parse_vlarb((HOOK_DATA / "smpquery_vlarb_mangled.txt").read_text())
    assert tables.low[:2] == ((1, 200), (2, 10))
    assert tables.high[:6] == ((0, 255), (3, 0), (0, 0), (0, 7), (0, 16), (5, 0))
    assert weights_by_vl(tables.high) == {**dict.fromkeys(range(8), 0), 0: 255 + 7 + 16}


def test_a_table_longer_than_one_row() -> None:
    """Synthetic: a 10-entry low table continues on a second VL/WEIGHT row pair."""
    text = (
        "# VLArbitration tables: Lid 3 port 2 LowCap 10 HighCap 0\n"
        "# Low priority VL Arbitration Table:\n"
        "VL    : |0x0 |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |\n"
        "WEIGHT: |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |0x8 |\n"
        "VL    : |0x8 |0xE |\n"
        "WEIGHT: |0xFF|0xA |\n"
    )
    tables = parse_vlarb(text)
    assert tables.low[-2:] == ((8, 255), (14, 10)) and len(tables.low) == 10
    assert tables.high == () and (tables.low_cap, tables.high_cap) == (10, 0)
    assert weights_by_vl(tables.low)[14] == 10


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ibwarn: [1] mad_rpc: _do_madrpc failed; dport (Lid 99)\n",
        "# No VLArbitration tables (BSP0): Lid 3 port 0\n",
        "# VLArbitration tables: Lid 3 port 1 LowCap 8 HighCap 8\n",  # cut short
        "# VLArbitration tables: Lid 3 port 1 LowCap 8 HighCap 0\n# Low priority VL Arbitration Table:\n"
        "VL    : |0x0 |0x1 |\nWEIGHT: |0x4 |\n",
        "# VLArbitration tables: Lid 3 port 1 LowCap 8 HighCap 0\n# Low priority VL Arbitration Table:\n"
        "VL    : |0x0 |0x1 |\nWEIGHT: |0x4 |zz  |\n",
    ],
    ids=["empty", "ibwarn", "port0", "no-rows", "short-row", "not-hex"],
)
def test_anything_else_is_an_error(text: str) -> None:
    with pytest.raises(VlarbParseError):
        parse_vlarb(text)
    with pytest.raises(hook_parse.ParseError):  # the hook's wrapper keeps its own error type
        hook_parse.parse_vlarb(text)


def test_port0_capture_is_an_error() -> None:
    with pytest.raises(VlarbParseError, match="LowCap"):
        parse_vlarb(data("smpquery_vlarb_port0.txt"))


def test_weights_by_vl_covers_vls_0_to_7() -> None:
    assert weights_by_vl([]) == dict.fromkeys(range(8), 0)
    assert weights_by_vl([(1, 64), (9, 3), (1, 1)]) == {**dict.fromkeys(range(8), 0), 1: 65, 9: 3}
    assert list(weights_by_vl([(9, 3), (0, 1)])) == [*range(8), 9]


def test_the_hook_uses_the_shared_parser() -> None:
    assert hook_parse.VlarbTables is VlarbTables
    text = data("smpquery_vlarb_switch.txt")
    assert hook_parse.parse_vlarb(text) == parse_vlarb(text)
