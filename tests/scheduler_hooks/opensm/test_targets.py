"""Target names and the strict value forms (what validation refuses before OpenSM can mangle it)."""

from __future__ import annotations

import pytest

from scheduler_hooks.opensm.targets import (
    Kind,
    Member,
    Target,
    ValueFormatError,
    canonical,
    members_from_ports,
    parse_members,
    parse_sl,
    parse_sl2vl,
    parse_target,
    parse_vlarb,
    render_vlarb,
)

NAMES = {"node1": ("0x0000000000100001",), "gpu2": ("0x00000000000000a1", "0x00000000000000a2")}


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("opensm.vlarb_high", Target(Kind.VLARB_HIGH)),
        ("opensm.vlarb_low", Target(Kind.VLARB_LOW)),
        ("opensm.sl2vl", Target(Kind.SL2VL)),
        ("opensm.port_group.training.sl", Target(Kind.GROUP_SL, "training")),
        ("opensm.port_group.pool-2.members", Target(Kind.GROUP_MEMBERS, "pool-2")),
        ("opensm.partition.inference_a.members", Target(Kind.PARTITION_MEMBERS, "inference_a")),
    ],
)
def test_target_names_round_trip(name: str, target: Target) -> None:
    assert parse_target(name) == target and target.name == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("slurm.partition.x.nodes", "not an OpenSM target"),
        ("opensm.vlarb", "unknown OpenSM target"),
        ("opensm.port_group.a.b.sl", "pool name 'a.b'"),
        ("opensm.partition..members", "pool name ''"),
        ("opensm.port_group.x y.sl", "pool name 'x y'"),
    ],
)
def test_bad_target_names(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_target(name)


def test_vlarb_parses_strictly_and_reports_every_fault() -> None:
    assert parse_vlarb("0:0, 1:64 ,2:32") == [(0, 0), (1, 64), (2, 32)]
    assert parse_vlarb("") == []
    with pytest.raises(ValueFormatError) as caught:
        parse_vlarb("1:64,1:3,15:1,8:2,2:256,x:1,3:0x10,4", max_vls=8)
    assert caught.value.problems == [
        "entry 2: VL 1 appears twice",
        "entry 3: VL 15 is out of range 0-14",
        "entry 4: VL 8 is not below qos_max_vls 8",
        "entry 5: weight 256 is out of range 0-255",
        "entry 6 'x:1' is not VL:weight (decimal numbers)",
        "entry 7 '3:0x10' is not VL:weight (decimal numbers)",
        "entry 8 '4' is not VL:weight (decimal numbers)",
    ]
    with pytest.raises(ValueFormatError, match="65 entries, at most 64"):
        parse_vlarb(",".join(["0:0"] * 65))


def test_vlarb_canonical_drops_zero_weights_and_render_keeps_them() -> None:
    target = Target(Kind.VLARB_LOW)
    assert canonical(target, "0:0,1:64,2:0,3:16") == "1:64,3:16"
    assert canonical(target, "0:0,1:0") == ""
    assert render_vlarb([(0, 0), (1, 64)]) == "0:0,1:64"
    assert render_vlarb([]) == "0:0"


def test_sl2vl_and_sl() -> None:
    assert parse_sl2vl("0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7") == [0, 1, 2, 3, 4, 5, 6, 7] * 2
    with pytest.raises(ValueFormatError) as caught:
        parse_sl2vl("0,1,15,a," + ",".join(["0"] * 12), max_vls=8)
    assert caught.value.problems == ["SL 2: VL 15 is out of range 0-14", "SL 3: 'a' is not a decimal VL"]
    with pytest.raises(ValueFormatError, match="need 16"):
        parse_sl2vl("0,1")
    assert parse_sl(" 7 ") == 7
    for bad in ("16", "-1", "0x3", "", "1.0"):
        with pytest.raises(ValueFormatError):
            parse_sl(bad)


def test_members_parse_normalise_and_fold() -> None:
    members = parse_members("node1, 0x00A1=limited,gpu2=both")
    assert members == [Member("node1"), Member("0x00000000000000a1", "limited"), Member("gpu2", "both")]
    with pytest.raises(ValueFormatError) as caught:
        parse_members("node1,node1,x=half,bad name,0xZZ", memberships=True)
    assert caught.value.problems == [
        "member 'node1' appears twice",
        "member 'x=half': membership must be full, limited or both",
        "member 'bad name' is neither a node name nor a port GUID (0x + hex)",
        "member '0xZZ' is neither a node name nor a port GUID (0x + hex)",
    ]
    with pytest.raises(ValueFormatError, match="full only"):
        parse_members("node1=limited", memberships=False)
    partition = Target(Kind.PARTITION_MEMBERS, "p")
    # GUIDs fold into a node name when every port of the node is a member with the same membership.
    assert canonical(partition, "0xa1,0xa2,0x100001=limited", NAMES) == "gpu2,node1=limited"
    assert canonical(partition, "0xa1,node1", NAMES) == "0x00000000000000a1,node1"
    assert canonical(partition, "gpu2=full,node1") == "gpu2,node1"
    ports = {"0x00000000000000a1": "full", "0x00000000000000a2": "limited"}
    assert [m.text() for m in members_from_ports(ports, NAMES)] == [
        "0x00000000000000a1",
        "0x00000000000000a2=limited",
    ]
