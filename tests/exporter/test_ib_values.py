"""Parsers of InfiniBand sysfs values."""

from __future__ import annotations

from exporter.sources.ib_values import (
    RateInfo,
    content_reason,
    parse_counter,
    parse_gid_port_guid,
    parse_guid,
    parse_rate,
    parse_state,
)


def test_parse_state() -> None:
    assert parse_state(b"4: ACTIVE\n") == (4, "ACTIVE")
    assert parse_state(b"5: LinkUp") == (5, "LinkUp")
    assert parse_state(b"ACTIVE") is None
    assert parse_state(b"x: ACTIVE") is None
    assert parse_state(b"4: A: B") is None


def test_parse_rate_matches_node_exporter_arithmetic() -> None:
    assert parse_rate(b"400 Gb/sec (4X NDR)\n") == RateInfo(50_000_000_000, 4, "NDR")
    assert parse_rate(b"25 Gb/sec (1X EDR)") == RateInfo(3_125_000_000, 1, "EDR")
    assert parse_rate(b"53.125 Gb/sec (1X HDR)") == RateInfo(6_640_625_000, 1, "HDR")
    assert parse_rate(b"56 Gb/sec (4X FDR)") == RateInfo(7_000_000_000, 4, "FDR")
    assert parse_rate(b"100 Gb/sec") == RateInfo(12_500_000_000, None, None)
    assert parse_rate(b"fast") is None
    assert parse_rate(b"x Gb/sec (4X)") is None


def test_parse_guids() -> None:
    assert parse_guid("0a7f:bc12:45ef:d23b\n") == "0x0a7fbc1245efd23b"
    assert parse_guid("nonsense") is None
    assert parse_gid_port_guid("fe80:0000:0000:0000:0a7f:bc12:45ef:d23c") == "0x0a7fbc1245efd23c"
    assert parse_gid_port_guid("0000:0000:0000:0000:0000:0000:0000:0000") is None


def test_parse_counter_checks_the_width() -> None:
    assert parse_counter(b"65535\n", 2**16 - 1) == 65535
    assert parse_counter(b"65536\n", 2**16 - 1) == "out_of_range"
    assert parse_counter(b"9" * 50 + b"\n", 2**16 - 1) == "out_of_range"
    assert parse_counter(str(2**64).encode(), 2**64 - 1) == "out_of_range"
    assert parse_counter(str(2**64 - 1).encode(), 2**64 - 1) == 2**64 - 1
    assert parse_counter(b"-3\n", 2**64 - 1) == "garbage"
    assert parse_counter(b"N/A (no PMA)\n", 2**64 - 1) == "not_available"
    assert parse_counter(b"\n", 2**64 - 1) == "empty"
    assert content_reason(b"12 apples") == "garbage"
