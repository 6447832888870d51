"""ibnetdiscover parsing on captured output, and the rate table."""

from __future__ import annotations

import pytest

from exporter.fabric.model import Link
from exporter.fabric.rates import rate_bytes_per_second
from exporter.fabric.topology import parse_ibnetdiscover
from tests.exporter.fabric.helpers import LEAF1, LEAF2, NODE1, SPINE1, data


def test_nodes_guids_descriptions_and_lids() -> None:
    topology, skipped = parse_ibnetdiscover(data("ibnetdiscover.txt"))
    assert skipped == 0
    assert [n.guid for n in topology.switches] == [SPINE1, LEAF1, LEAF2]
    leaf1 = topology.nodes[LEAF1]
    assert (leaf1.kind, leaf1.desc, leaf1.ports, leaf1.lid) == ("switch", "MF0;leaf-1:MQM8700/U1", 6, 3)
    assert leaf1.lid_of(5) == 3
    node1 = topology.nodes[NODE1]
    assert (node1.kind, node1.desc, node1.ports, node1.lid) == ("ca", "node1", 1, None)
    assert node1.port_lids == {1: 1}
    assert node1.port_guids == {1: "0x0000000000100001"}
    assert len(topology.cas) == 4


def test_links_from_both_ends_with_width_and_speed() -> None:
    topology, _ = parse_ibnetdiscover(data("ibnetdiscover.txt"))
    assert topology.links[(LEAF1, 1)] == Link(NODE1, 1, 4, "EDR")
    assert topology.links[(NODE1, 1)] == Link(LEAF1, 1, 4, "EDR")
    assert topology.links[(SPINE1, 2)] == Link(LEAF2, 3, 4, "EDR")
    assert (LEAF1, 4) not in topology.links  # not cabled
    assert len(topology.links) == 12


def test_garbled_lines_are_skipped_and_counted() -> None:
    text = data("ibnetdiscover.txt").replace(
        '[2]\t"H-0000000000100002"[1](100003)', "[2]\tgarbage here\n[x] nonsense"
    )
    text = "stray line before any node\n" + text
    topology, skipped = parse_ibnetdiscover(text)
    assert skipped == 3
    assert (LEAF1, 1) in topology.links
    assert (LEAF1, 2) not in topology.links or topology.links[(LEAF1, 2)].remote_port == 1  # other end
    assert len(topology.switches) == 3


def test_switch_header_variants() -> None:
    text = (
        'Switch\t36 "S-7cfe900300a5a2c0"\t\t# "quote " inside" enhanced port 0 lid 17 lmc 0\n'
        '[37]\t"H-506b4b0300da1e48"[1](506b4b0300da1e49) \t\t# "node1 HCA-1" lid 5 4xHDR s=1 w=2 v=4\n'
        'Ca\t2 "H-506b4b0300da1e48"\t\t# "node1 HCA-1"\n'
        '[1](506b4b0300da1e49) \t"S-7cfe900300a5a2c0"[37]\t\t# lid 5 lmc 0 "switch" lid 17 4xHDR\n'
    )
    topology, skipped = parse_ibnetdiscover(text)
    assert skipped == 0
    switch = topology.nodes["0x7cfe900300a5a2c0"]
    assert (switch.desc, switch.lid, switch.ports) == ('quote " inside', 17, 36)
    assert topology.links[("0x7cfe900300a5a2c0", 37)] == Link("0x506b4b0300da1e48", 1, 4, "HDR")
    assert topology.nodes["0x506b4b0300da1e48"].port_lids == {1: 5}


GOOD_SWITCH = 'Switch\t8 "S-0000000000200002"\t\t# "leaf2" base port 0 lid 4 lmc 0'
GOOD_CA = 'Ca\t1 "H-0000000000100008"\t\t# "node5"'


@pytest.mark.parametrize(
    "garbage",
    [
        '[1]\t"H-0000000000100008"[99999999999](100009) \t\t# "node5" lid 8 4xSDR',  # remote port
        '[1]\t"H-0000000000100008"[255](100009) \t\t# "node5" lid 8 4xSDR',
        '[1]\t"H-0000000000100008"[0](100009) \t\t# "node5" lid 8 4xSDR',
        '[999]\t"H-0000000000100008"[1](100009) \t\t# "node5" lid 8 4xSDR',  # own port
        '[0]\t"H-0000000000100008"[1](100009) \t\t# "node5" lid 8 4xSDR',
        '[1]\t"H-10000000000000008"[1](100009) \t\t# "node5" lid 8 4xSDR',  # 68-bit GUID
        '[1]\t"H-0000000000000000"[1](100009) \t\t# "node5" lid 8 4xSDR',  # GUID 0
        '[1]\t"H-0000000000100008"[1](100009) \t\t# "node5" lid 8 3xSDR',  # no 3-lane links
        '[1]\t"H-0000000000100008"[1](100009) \t\t# "node5" lid 8 99999999999xSDR',
    ],
)
def test_a_switch_port_line_with_a_number_out_of_range_is_skipped(garbage: str) -> None:
    topology, skipped = parse_ibnetdiscover(f"{GOOD_SWITCH}\n{garbage}\n{GOOD_CA}\n")
    assert skipped == 1
    assert topology.links == {}  # neither end: the garbage never becomes a link
    assert set(topology.nodes) == {"0x0000000000200002", "0x0000000000100008"}


@pytest.mark.parametrize(
    "garbage",
    [
        'Switch\t8 "S-0000000000200002"\t\t# "leaf2" base port 0 lid 99999 lmc 0',  # LID over 0xBFFF
        'Switch\t8 "S-0000000000200002"\t\t# "leaf2" base port 0 lid 99999999999999 lmc 0',
        'Switch\t0 "S-0000000000200002"\t\t# "leaf2" base port 0 lid 4 lmc 0',  # no ports
        'Switch\t300 "S-0000000000200002"\t\t# "leaf2" base port 0 lid 4 lmc 0',
        'Switch\t8 "S-99999999999999999999"\t\t# "leaf2" base port 0 lid 4 lmc 0',
    ],
)
def test_a_bad_node_line_is_skipped_with_its_port_lines(garbage: str) -> None:
    port = '[1]\t"H-0000000000100008"[1](100009) \t\t# "node5" lid 8 4xSDR'
    topology, skipped = parse_ibnetdiscover(f"{garbage}\n{port}\n{GOOD_CA}\n")
    assert skipped == 2
    assert list(topology.nodes) == ["0x0000000000100008"] and topology.links == {}


def test_a_ca_port_with_a_bad_lid_or_port_guid_is_skipped() -> None:
    text = (
        'Ca\t2 "H-0000000000100008"\t\t# "node5"\n'
        '[1](100009) \t"S-0000000000200002"[1]\t\t# lid 49152 lmc 0 "leaf2" lid 4 4xSDR\n'
        '[2](0) \t"S-0000000000200002"[2]\t\t# lid 9 lmc 0 "leaf2" lid 4 4xSDR\n'
    )
    topology, skipped = parse_ibnetdiscover(text)
    assert skipped == 2 and topology.links == {}
    assert topology.nodes["0x0000000000100008"].port_lids == {}


def test_a_ca_port_lmc_gives_its_lid_range_and_a_bad_one_is_skipped() -> None:
    text = (
        'Ca\t3 "H-0000000000100008"\t\t# "node5"\n'
        '[1](100009) \t"S-0000000000200002"[1]\t\t# lid 8 lmc 2 "leaf2" lid 4 4xSDR\n'
        '[2](10000a) \t"S-0000000000200002"[2]\t\t# lid 16 lmc 0 "leaf2" lid 4 4xSDR\n'
        '[3](10000b) \t"S-0000000000200002"[3]\t\t# lid 20 lmc 8 "leaf2" lid 4 4xSDR\n'
    )
    topology, skipped = parse_ibnetdiscover(text)
    node = topology.nodes["0x0000000000100008"]
    assert skipped == 1 and node.port_lids == {1: 8, 2: 16}  # LMC 8: more than 7 bits of LID
    assert list(node.lids_of(1)) == [8, 9, 10, 11] and list(node.lids_of(2)) == [16]
    assert list(node.lids_of(3)) == []


def test_empty_output_gives_an_empty_topology() -> None:
    topology, skipped = parse_ibnetdiscover("")
    assert (topology.nodes, topology.links, skipped) == ({}, {}, 0)


def test_rates_match_the_kernel_rate_file() -> None:
    # sysfs: "10 Gb/sec (4X)", "56 Gb/sec (4X FDR)", "100 Gb/sec (4X EDR)", "400 Gb/sec (4X NDR)"
    assert rate_bytes_per_second(4, "SDR") == 1_250_000_000
    assert rate_bytes_per_second(4, "FDR") == 7_000_000_000
    assert rate_bytes_per_second(4, "EDR") == 12_500_000_000
    assert rate_bytes_per_second(4, "NDR") == 50_000_000_000
    assert rate_bytes_per_second(1, "SDR") == 312_500_000
    assert rate_bytes_per_second(4, "FDR10") == 5_000_000_000
    assert rate_bytes_per_second(None, "EDR") is None
    assert rate_bytes_per_second(4, "ZZZ") is None
