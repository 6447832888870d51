"""Target names and value formats shared by the recommender and the scheduler hooks."""

from __future__ import annotations

import pytest

from proposals import targets


@pytest.mark.parametrize(
    ("name", "family", "pool"),
    [
        ("opensm.vlarb_high", targets.VLARB_HIGH, None),
        ("opensm.vlarb_low", targets.VLARB_LOW, None),
        ("opensm.sl2vl", targets.SL2VL, None),
        ("opensm.port_group.gpu-a.sl", targets.PORT_GROUP_SL, "gpu-a"),
        ("opensm.partition.gpu_b.members", targets.PARTITION_MEMBERS, "gpu_b"),
        ("slurm.partition.night.nodes", targets.SLURM_NODES, "night"),
    ],
)
def test_target_names_parse_and_rebuild(name: str, family: str, pool: str | None) -> None:
    target = targets.parse_target(name)
    assert (target.family, target.pool, target.name) == (family, pool, name)


@pytest.mark.parametrize(
    "name", ["opensm.vlarb", "slurm.partition.a.b.nodes", "slurm.partition..nodes", "opensm.port_group.a.vl"]
)
def test_unknown_targets(name: str) -> None:
    with pytest.raises(ValueError, match="unknown target"):
        targets.parse_target(name)


def test_builders() -> None:
    assert targets.port_group_sl("a") == "opensm.port_group.a.sl"
    assert targets.partition_members("a") == "opensm.partition.a.members"
    assert targets.slurm_partition_nodes("a") == "slurm.partition.a.nodes"


def test_vlarb() -> None:
    assert targets.parse_vlarb("1:32,0:64") == ((1, 32), (0, 64))
    assert targets.format_vlarb({1: 32, 0: 64}) == "0:64,1:32"
    assert targets.format_vlarb([(1, 32), (0, 64)]) == "1:32,0:64"
    assert targets.vl_weights("0:4,1:0") == {0: 4, 1: 0}
    for bad, why in [
        ("", "at least one"),
        ("0:4,", "not VL:weight"),
        ("0: 4", "not VL:weight"),
        ("0:04", "not VL:weight"),
        ("15:1", "VL 15 is out of range"),
        ("0:256", "out of range 0-255"),
        ("0:1,0:2", "more than once"),
    ]:
        with pytest.raises(ValueError, match=why):
            targets.parse_vlarb(bad)


def test_sl2vl_and_sl() -> None:
    text = "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,15"
    assert targets.format_sl2vl(targets.parse_sl2vl(text)) == text
    with pytest.raises(ValueError, match="must list 16"):
        targets.parse_sl2vl("0,1")
    with pytest.raises(ValueError, match="SL 3"):
        targets.parse_sl2vl("0,1,2,16,4,5,6,7,0,1,2,3,4,5,6,7")
    assert targets.parse_sl("15") == 15
    with pytest.raises(ValueError, match="service level"):
        targets.parse_sl("16")


def test_node_lists_sort_naturally() -> None:
    assert targets.format_node_list(["node10", "node2", "node1", "node2"]) == "node1,node2,node10"
    assert targets.parse_node_list("node1,node2,node10") == ("node1", "node2", "node10")
    assert targets.parse_node_list("") == ()
    with pytest.raises(ValueError, match="natural sort order: node1,node2,node10"):
        targets.parse_node_list("node1,node10,node2")
    with pytest.raises(ValueError, match="no hostlist"):
        targets.parse_node_list("node[1-2]")


def test_partition_members() -> None:
    guid_a, guid_b = "0x0002c90300000001", "0x0002c90300000002"
    assert targets.parse_members(f"{guid_a}=full,{guid_b}") == (f"{guid_a}=full", guid_b)
    assert targets.format_members([guid_b, guid_a]) == f"{guid_a},{guid_b}"
    assert targets.member_guid(f"{guid_a}=limited") == guid_a
    for bad, why in [
        ("0x2c90300000001", "not a port GUID"),
        ("0x0002C90300000001", "not a port GUID"),
        (f"{guid_b},{guid_a}", "sorted order"),
        (f"{guid_a},{guid_a}=full", "more than once"),
    ]:
        with pytest.raises(ValueError, match=why):
            targets.parse_members(bad)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (targets.parse_node_list, "node1\n"),
        (targets.parse_vlarb, "0:4\n"),
        (targets.parse_vlarb, "0:\u0664"),
        (targets.parse_sl, "1\n"),
        (targets.parse_members, "0x0002c90300000001\n"),
        (targets.parse_target, "opensm.sl2vl\n"),
        (targets.parse_target, "slurm.partition.a.nodes\n"),
    ],
)
def test_trailing_newlines_and_unicode_digits_are_refused(check: object, value: str) -> None:
    assert callable(check)
    with pytest.raises(ValueError):
        check(value)
