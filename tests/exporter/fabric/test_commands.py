"""The argv the exporter builds: no shell, the diag options, loops per switch, never a reset flag."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from exporter.fabric.commands import HELPER, DiagCommands, DiagOptions, ResetFlagError, assert_read_only
from exporter.fabric.sweep import Sweeper, SweepSettings
from tests.exporter.fabric.helpers import ScriptedRunner

RESET_FLAGS = {"-r", "-R", "--reset_after_read", "--Reset_only"}


def _commands(**options: object) -> DiagCommands:
    return DiagCommands(DiagOptions(bin_dir=Path("/opt/ib"), **options))  # type: ignore[arg-type]


def test_switch_loops_read_all_ports_in_one_process() -> None:
    commands = _commands()
    assert commands.switch_counters(7, extended=False) == ["/opt/ib/perfquery", "-l", "7", "255"]
    assert commands.switch_counters(7, extended=True) == ["/opt/ib/perfquery", "-x", "-l", "7", "255"]
    assert commands.port_counters(9, 1, extended=True) == ["/opt/ib/perfquery", "-x", "9", "1"]
    assert commands.port_vl_wait(9, 2) == ["/opt/ib/perfquery", "--vlxmitcounters", "9", "2"]


def test_diag_options_are_passed_to_every_program() -> None:
    commands = _commands(ca="mlx5_2", port=1, timeout_ms=250)
    argv = commands.switch_counters(3, extended=False)
    assert argv[1:7] == ["-C", "mlx5_2", "-P", "1", "-t", "250"]
    assert commands.ibnetdiscover(Path("/tmp/x.cache"))[1:] == [
        "-C", "mlx5_2", "-P", "1", "-t", "250", "--cache", "/tmp/x.cache",
    ]  # fmt: skip
    assert commands.iblinkinfo(Path("/tmp/x.cache"))[-3:] == ["--load-cache", "/tmp/x.cache", "-l"]
    batch = commands.vl_wait_batch([(3, [1, 2, 3, 7]), (4, [1])])
    assert batch == [
        sys.executable, "-S", "-I", str(HELPER), "--ca", "mlx5_2", "--port", "1", "--timeout-ms", "250",
        "3:1-3,7", "4:1",
    ]  # fmt: skip


def test_programs_are_found_in_sbin_without_bin_dir() -> None:
    path = DiagCommands(DiagOptions()).program("perfquery")
    assert path.endswith("perfquery")


def test_every_command_a_sweep_runs_is_read_only(tmp_path: Path) -> None:
    runner = ScriptedRunner()
    for mode in ("batch", "perfquery"):
        settings = SweepSettings(hca_ports=True, vl_counters=mode)
        sweeper = Sweeper(_commands(ca="mlx5_0", timeout_ms=100), runner, settings, tmp_path)
        try:
            sweeper.sweep()
        finally:
            sweeper.close()
    programs = {Path(argv[0]).name for argv in runner.calls} | {
        Path(a).name for c in runner.calls for a in c[:4]
    }
    assert {"ibnetdiscover", "iblinkinfo", "perfquery", "pma_helper.py"} <= programs
    for argv in runner.calls:
        assert not RESET_FLAGS & set(argv), argv
        assert not any(a.startswith("-") and not a.startswith("--") and set(a[1:]) & {"r", "R"} for a in argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["perfquery", "-r", "3", "1"],
        ["perfquery", "-R", "3"],
        ["perfquery", "-xr", "3", "1"],
        ["perfquery", "--reset_after_read", "3"],
        ["perfquery", "--Reset_only", "3"],
    ],
)
def test_reset_flags_are_refused(argv: list[str]) -> None:
    with pytest.raises(ResetFlagError):
        assert_read_only(argv)


def test_option_values_are_not_mistaken_for_flags() -> None:
    assert_read_only(["perfquery", "-C", "-rdev", "-P", "1", "-x", "-l", "3", "255"])
