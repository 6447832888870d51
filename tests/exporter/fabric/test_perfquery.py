"""perfquery parsing: basic (-l loop), extended (-x), per-VL, CA ports, garbled lines."""

from __future__ import annotations

from exporter.fabric.perfquery import parse_perfquery
from tests.exporter.fabric.helpers import data


def test_basic_loop_gives_one_block_per_port_with_sysfs_names() -> None:
    blocks, skipped = parse_perfquery(data("perfquery_switch_basic.txt"))
    assert skipped == 0
    assert [(b.attribute, b.lid, b.port) for b in blocks] == [("basic", 3, p) for p in range(7)]
    port1, port2 = blocks[1].counters, blocks[2].counters
    assert port1["symbol_error"] == 7
    assert port2["port_xmit_wait"] == 4294967295
    assert set(port1) >= {"link_downed", "VL15_dropped", "port_rcv_data", "port_xmit_packets"}
    assert "CounterSelect" not in port1 and "qp1_dropped" not in port1


def test_extended_block_names() -> None:
    blocks, skipped = parse_perfquery(data("perfquery_switch_extended.txt"))
    assert skipped == 0
    assert [b.attribute for b in blocks] == ["extended"] * 7
    assert blocks[2].counters["port_xmit_data"] == 123456789228  # set 123456789012, + SMP traffic
    assert set(blocks[2].counters) == {
        "port_xmit_data",
        "port_rcv_data",
        "port_xmit_packets",
        "port_rcv_packets",
        "unicast_xmit_packets",
        "unicast_rcv_packets",
        "multicast_xmit_packets",
        "multicast_rcv_packets",
    }


def test_vl_block_and_helper_output_parse_alike() -> None:
    (perfquery,), skipped = parse_perfquery(data("perfquery_port_vl.txt"))
    assert skipped == 0
    helper, skipped = parse_perfquery(data("pma_helper_vl.txt"))
    assert skipped == 0
    assert [(b.attribute, b.lid, b.port) for b in helper] == [("vl", 3, 2), ("vl", 3, 3)]
    assert perfquery.vl_wait == helper[1].vl_wait
    assert perfquery.vl_wait[3] == 42 and len(perfquery.vl_wait) == 16


def test_ca_port_block() -> None:
    (block,), _ = parse_perfquery(data("perfquery_ca_basic.txt"))
    assert (block.attribute, block.lid, block.port) == ("basic", 1, 1)


def test_garbled_lines_are_skipped_and_counted() -> None:
    text = data("perfquery_switch_basic.txt")
    text = text.replace("LinkDownedCounter:...............0", "LinkDownedCounter:...............zz", 1)
    text = "orphan:....1\n" + text + "\x00\x01 binary junk\n# Port counters: Lid 3 port 9\n"
    blocks, skipped = parse_perfquery(text)
    assert skipped == 3  # the orphan field, the bad value, the junk; the empty block is dropped
    assert len(blocks) == 7
    assert "link_downed" not in blocks[0].counters and blocks[0].counters["symbol_error"] == 0


def test_unknown_attribute_blocks_are_ignored() -> None:
    text = "# PortXmitDataSL counters: Lid 3 port 1\nPortXmitDataSL0:....5\n" + data("perfquery_port_vl.txt")
    blocks, skipped = parse_perfquery(text)
    assert skipped == 0
    assert [b.attribute for b in blocks] == ["vl"]


def _block(title: str, fields: dict[str, str], lid: str = "3", port: str = "1") -> str:
    lines = [f"# {title}: Lid {lid} port {port} (CapMask: 0x1300)"]
    return "\n".join([*lines, *(f"{name}:".ljust(33, ".") + value for name, value in fields.items())]) + "\n"


def test_values_wider_than_their_counter_are_skipped_and_counted() -> None:
    text = (
        _block(
            "Port counters",
            {
                "SymbolErrorCounter": "65535",  # 16 bits: the most it holds
                "LinkDownedCounter": "256",  # 8 bits
                "LocalLinkIntegrityErrors": "9" * 50,  # 4 bits, and 50 digits
                "ExcessiveBufferOverrunErrors": "15",
                "PortXmitWait": str(1 << 32),  # 32 bits
                "PortXmitData": "4294967295",
            },
        )
        + _block(
            "Port extended counters",
            {"PortXmitData": str((1 << 64) - 1), "PortRcvData": str(1 << 64), "PortXmitPkts": "1" * 5000},
        )
        + _block(
            "PortVLXmitWaitCounters counters",
            {"PortVLXmitWait3": "65535", "PortVLXmitWait4": "65536", "PortVLXmitWait16": "1"},
        )
    )
    (basic, extended, vl), skipped = parse_perfquery(text)
    assert skipped == 3 + 2 + 2
    assert basic.counters == {
        "symbol_error": 65535,
        "excessive_buffer_overrun_errors": 15,
        "port_xmit_data": 4294967295,
    }
    assert extended.counters == {"port_xmit_data": (1 << 64) - 1}
    assert vl.vl_wait == {3: 65535}


def test_a_header_out_of_range_skips_its_block() -> None:
    fields = {"SymbolErrorCounter": "1", "PortXmitWait": "2"}
    for lid, port in (("49152", "1"), ("0", "1"), ("99999999999999999999999", "1"), ("3", "256")):
        blocks, skipped = parse_perfquery(_block("Port counters", fields, lid, port))
        assert (blocks, skipped) == ([], 3), (lid, port)
    blocks, skipped = parse_perfquery(_block("Port counters", fields, "3", "255"))  # the all-ports selector
    assert skipped == 0 and blocks[0].counters == {"symbol_error": 1, "port_xmit_wait": 2}
