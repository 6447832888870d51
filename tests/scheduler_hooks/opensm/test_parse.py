"""Parsers against output captured from ibsim 0.10 + OpenSM 3.3.23 + infiniband-diags 44 (data/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_hooks.opensm.fabric import build_topology, membership
from scheduler_hooks.opensm.parse import (
    ParseError,
    parse_path_records,
    parse_pkeys,
    parse_ports_report,
    parse_sl2vl,
    parse_vlarb,
)
from scheduler_hooks.opensm.targets import format_vlarb

DATA = Path(__file__).parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_vlarb_switch_and_hca_ports() -> None:
    for name in ("smpquery_vlarb_switch.txt", "smpquery_vlarb_hca.txt"):
        tables = parse_vlarb(data(name))
        assert (tables.low_cap, tables.high_cap) == (8, 8)
        assert tables.low == ((0, 0), (1, 64), (2, 32), (3, 16), (4, 8), (5, 4), (6, 2), (7, 1))
        assert format_vlarb(tables.high) == "0:4"


def test_vlarb_shows_what_opensm_made_of_a_malformed_weight() -> None:
    """`qos_vlarb_high 0:255,3:abc,7:300,16:5` was accepted by OpenSM and pushed as this table."""
    tables = parse_vlarb(data("smpquery_vlarb_mangled.txt"))
    assert format_vlarb(tables.low) == "1:200,2:10"
    assert format_vlarb(tables.high) == "0:255,0:7,0:16"  # nothing like what was asked for


def test_sl2vl_rows() -> None:
    rows = parse_sl2vl(data("smpquery_sl2vl_switch.txt"))
    assert [(i, o) for i, o, _ in rows] == [(i, 3) for i in range(7)]
    assert {vls for _, _, vls in rows} == {(0, 1, 2, 3, 4, 5, 6, 7) * 2}
    changed = parse_sl2vl(data("smpquery_sl2vl_switch_changed.txt"))
    assert {vls for _, _, vls in changed} == {(1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 0, 0)}
    (hca,) = parse_sl2vl(data("smpquery_sl2vl_hca.txt"))
    assert hca[:2] == (0, 0)


def test_pkeys_and_membership() -> None:
    full, limited, none = (parse_pkeys(data(f"smpquery_pkeys_{n}.txt")) for n in ("full", "limited", "none"))
    assert full == [0xFFFF, 0x8002] and limited == [0xFFFF, 0x0002] and none == [0xFFFF]
    assert [membership(k, 0x0002) for k in (full, limited, none)] == ["full", "limited", "none"]
    assert membership(full, 0x7FFF) == "full"


def test_path_records() -> None:
    (record,) = parse_path_records(data("saquery_path_sl3.txt"))
    assert (record.slid, record.dlid, record.sl, record.pkey) == (1, 5, 3, 0x8002)
    (default,) = parse_path_records(data("saquery_path_default.txt"))
    assert default.sl == 0 and default.pkey == 0xFFFF
    assert parse_path_records(data("saquery_path_none.txt")) == []


def test_ports_report_and_topology() -> None:
    ports = parse_ports_report(data("ibnetdiscover_p.txt"))
    cas = [p for p in ports if p.kind == "CA"]
    assert sorted(p.description for p in cas) == ["node1", "node2", "node3", "node4"]
    node1 = next(p for p in cas if p.description == "node1")
    assert (node1.lid, node1.port, node1.guid, node1.linked) == (1, 1, "0x0000000000100001", True)
    topology = build_topology(ports, r"^(\S+)", {"extra": ("0x00000000000000ff",)})
    assert len(topology.switch_ports) == 2 + 3 + 3  # linked switch ports only, port 0 never
    assert topology.names["node2"] == ("0x0000000000100003",) and topology.names["extra"]
    assert topology.port_names["node3/P1"] == "0x0000000000100005"
    assert str(topology.guid_port["0x0000000000100001"]) == "node1[1] (lid 1)"


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_vlarb, "nothing here"),
        (parse_sl2vl, "# SL2VL table: Lid 3\n"),
        (parse_pkeys, "ibwarn: failed"),
        (parse_ports_report, "garbage line"),
        (parse_path_records, "PathRecord dump:\n\t\tsl......0x1\n"),
    ],
)
def test_unexpected_output_is_an_error(parser: object, text: str) -> None:
    assert callable(parser)
    with pytest.raises(ParseError):
        parser(text)
