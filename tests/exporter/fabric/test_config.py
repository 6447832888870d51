"""Fabric exporter configuration: flags over YAML, every problem listed with its key, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.fabric.config import FabricConfig, load_config
from exporter.fabric.main import main
from foundation.errors import ConfigError


def test_defaults() -> None:
    cfg = load_config([])
    assert cfg == FabricConfig()
    assert (cfg.listen_address, cfg.vl_counters, cfg.concurrency, cfg.hca_ports) == (
        ":9471",
        "batch",
        4,
        False,
    )


def test_flags() -> None:
    cfg = load_config(
        [
            "--web.listen-address=127.0.0.1:19471",
            "--fabric.sweep-interval-seconds=5",
            "--fabric.concurrency=2",
            "--fabric.command-timeout-seconds=3",
            "--fabric.hca-ports",
            "--fabric.vl-counters=perfquery",
            "--fabric.vl-count=4",
            "--no-fabric.port-states",
            "--fabric.forget-after-seconds=60",
            "--fabric.scratch-dir=/tmp",
            "--ibdiag.ca=mlx5_0",
            "--ibdiag.port=1",
            "--ibdiag.timeout-ms=200",
            "--log.level=debug",
        ]
    )
    assert cfg.listen_address == "127.0.0.1:19471"
    assert (cfg.sweep_interval_seconds, cfg.concurrency, cfg.command_timeout_seconds) == (5, 2, 3)
    assert (cfg.hca_ports, cfg.vl_counters, cfg.vl_count, cfg.port_states) == (True, "perfquery", 4, False)
    assert (cfg.ibdiag_ca, cfg.ibdiag_port, cfg.ibdiag_timeout_ms) == ("mlx5_0", 1, 200)
    assert (cfg.forget_after_seconds, cfg.log_level, cfg.scratch_dir) == (60, "debug", Path("/tmp"))


def test_yaml_with_flags_winning_and_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "names.txt").write_text("0x200001 leaf-01\n")
    config = tmp_path / "fabric.yml"
    config.write_text(
        "fabric:\n  sweep_interval_seconds: 10\n  node_name_map: names.txt\n  vl_counters: off\n"
        "ibdiag:\n  ca: mlx5_1\n  timeout_ms: 100\n"
    )
    cfg = load_config(["--config.file", str(config), "--ibdiag.ca", "mlx5_3"])
    assert cfg.sweep_interval_seconds == 10
    assert cfg.node_name_map == tmp_path / "names.txt"
    assert cfg.ibdiag_ca == "mlx5_3"
    assert cfg.ibdiag_timeout_ms == 100
    assert cfg.vl_counters == "off"


def test_yaml_off_quoted_or_not(tmp_path: Path) -> None:
    config = tmp_path / "fabric.yml"
    for text in ("'off'", "off"):
        config.write_text(f"fabric:\n  vl_counters: {text}\n")
        assert load_config(["--config.file", str(config)]).vl_counters == "off"


def test_every_problem_is_listed_with_its_key(tmp_path: Path) -> None:
    (tmp_path / "names.txt").write_text("zzz not-a-guid\n")
    config = tmp_path / "fabric.yml"
    config.write_text(
        "fabric:\n  concurrency: 0\n  vl_counters: fast\n  bogus: 1\n  node_name_map: names.txt\n"
        "ibdiag:\n  port: x\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(
            ["--config.file", str(config), "--fabric.sweep-interval-seconds=0", "--web.listen-address=nope"]
        )
    problems = info.value.problems
    assert f"{config}: fabric.bogus: unknown key" in problems
    assert any(p.startswith(f"{config}: ibdiag.port:") for p in problems)
    assert f"{config}: concurrency: must be between 1 and 64" in problems
    assert f"{config}: vl_counters: must be one of batch, perfquery, off" in problems
    assert "flag: sweep_interval_seconds: must be > 0" in problems
    assert any(p.startswith("flag: listen_address:") for p in problems)
    assert any(p.startswith(f"{config}: node_name_map: {tmp_path / 'names.txt'}:1") for p in problems)
    assert len(problems) == 7


def test_main_exits_2_and_lists_problems(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fabric.concurrency=0", "--fabric.vl-count=99"]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err
    assert "concurrency: must be between 1 and 64" in err and "vl_count: must be between 1 and 16" in err
