"""The batch VL reader's pure parts: target syntax, decoding, perfquery-identical output, usage errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exporter.fabric.commands import HELPER
from exporter.fabric.pma_helper import decode_vl_wait, format_block, main, parse_target
from tests.exporter.fabric.helpers import data


def test_parse_target() -> None:
    assert parse_target("4:1-3,7") == (4, [1, 2, 3, 7])
    assert parse_target("12:5") == (12, [5])
    for bad in ("4", "x:1", "4:", "4:a-b", "0:1", "4:300", "4:1-"):
        with pytest.raises(ValueError):
            parse_target(bad)


def test_decode_big_endian_vl_counters() -> None:
    data_bytes = (
        bytes([0, 3, 0x12, 0x34]) + b"".join(v.to_bytes(2, "big") for v in range(100, 116)) + bytes(28)
    )
    select, counter_select, waits = decode_vl_wait(data_bytes)
    assert (select, counter_select) == (3, 0x1234)
    assert waits == list(range(100, 116))


def test_output_is_byte_identical_to_perfquery() -> None:
    waits = [0] * 16
    waits[3] = 42
    assert format_block(3, 3, 3, 0, waits) == data("perfquery_port_vl.txt")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["--timeout-ms", "soon", "3:1"]) == 2
    assert main(["--ca"]) == 2
    assert "pma_helper:" in capsys.readouterr().err


def test_runs_standalone_with_the_standard_library_only() -> None:
    result = subprocess.run(
        [sys.executable, "-S", "-I", str(HELPER), "nonsense"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "expected LID:PORTS" in result.stderr
