"""The device check a session with a real GPU runs: it must work end to end before a GPU is at hand."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from benchmarks import gpu_device_check
from simulator.fake_nvml import H200_SXM

pytestmark = pytest.mark.integration


def test_the_check_runs_on_simulated_h200s_and_writes_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "check.md"
    assert gpu_device_check.main(["--fake", "2", "--load-seconds", "4", "--report", str(report)]) == 0
    text = report.read_text()
    assert text == capsys.readouterr().out
    for heading in (
        "## Machine",
        "## NVML calls",
        "## Memory: v1, v2",
        "## Read costs",
        "## The exporter under",
    ):
        assert heading in text
    reserve = H200_SXM.memory_reserved_bytes / 2**20
    assert f"| 0 | 41575 | 40960 | {reserve:.0f} |" in text  # v1 = v2 + the reserve, on an H200 model
    assert "| field RETIRED_SBE | NotSupported | - |" in text and "| nvmlDeviceGetRemappedRows | ok |" in text
    assert "NVML errors counted: none" in text and "stale GPUs: none" in text
    assert "`/metrics` over HTTP" in text and "NVML read time" in text


def test_without_a_driver_it_says_so_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        assert gpu_device_check.main(["--load-seconds", "1"]) == 0
        assert "nothing to check on this machine" in capsys.readouterr().out
    else:  # pragma: no cover - a machine with a GPU
        pynvml.nvmlShutdown()
        pytest.skip("a real GPU is here: the check would run for real")
