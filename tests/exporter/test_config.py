"""Flags over YAML, frozen config, every problem at once, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.config import load_config
from exporter.main import main
from foundation.errors import ConfigError


def test_flags_override_yaml_which_overrides_defaults(tmp_path: Path) -> None:
    config = tmp_path / "exporter.yml"
    config.write_text(
        "web:\n  listen_address: 127.0.0.1:9999\ncollectors:\n  gpu: {enabled: false}\n"
        f"  infiniband: {{sysfs_root: {tmp_path}}}\nhealth: {{max_age_seconds: 30}}\n"
    )
    cfg = load_config(["--config.file", str(config), "--web.listen-address", "127.0.0.1:1234"])
    assert cfg.listen_address == "127.0.0.1:1234"
    assert cfg.gpu is False and cfg.sysfs_root == tmp_path and cfg.health_max_age_seconds == 30
    assert cfg.infiniband is True


def test_every_problem_is_reported_with_its_key(tmp_path: Path) -> None:
    config = tmp_path / "exporter.yml"
    config.write_text(
        "web:\n  listen_address: nonsense\n  colour: blue\n"
        "collectors:\n  gpu: {enabled: maybe, deadline_seconds: -1}\n"
        "  infiniband: {sysfs_root: /does/not/exist}\nlog: {level: loud}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(["--config.file", str(config)])
    text = "\n".join(err.value.problems)
    assert f"{config}: web.colour: unknown key" in text
    assert f"{config}: collectors.gpu.enabled: must be true or false" in text
    assert f"{config}: listen_address:" in text
    assert f"{config}: gpu_deadline_seconds: must be > 0" in text
    assert f"{config}: sysfs_root: not a directory" in text
    assert f"{config}: log_level:" in text
    assert len(err.value.problems) == 6


def test_invalid_config_exits_2_and_lists_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("web: [not, a, mapping\n")
    assert main(["--config.file", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["--sysfs-root", "/nope", "--web.listen-address", "x"]) == 2
    err = capsys.readouterr().err
    assert "flag: sysfs_root" in err and "flag: listen_address" in err


def test_missing_config_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(["--config.file", str(tmp_path / "absent.yml")])


def test_gpu_sampling_options(tmp_path: Path) -> None:
    cfg = load_config(["--sysfs-root", str(tmp_path)])
    assert (cfg.gpu_sample_interval_seconds, cfg.gpu_slow_sample_interval_seconds) == (1.0, 10.0)
    cfg = load_config(
        [
            "--sysfs-root",
            str(tmp_path),
            "--gpu.sample-interval-seconds",
            "0.5",
            "--gpu.slow-sample-interval-seconds",
            "5",
        ]
    )
    assert (cfg.gpu_sample_interval_seconds, cfg.gpu_slow_sample_interval_seconds) == (0.5, 5.0)
    assert (
        load_config(
            ["--sysfs-root", str(tmp_path), "--gpu.sample-interval-seconds", "0"]
        ).gpu_sample_interval_seconds
        == 0
    )
    with pytest.raises(ConfigError) as err:
        load_config(
            [
                "--sysfs-root",
                str(tmp_path),
                "--gpu.sample-interval-seconds",
                "-1",
                "--gpu.slow-sample-interval-seconds",
                "-2",
            ]
        )
    text = "\n".join(err.value.problems)
    assert "flag: gpu_sample_interval_seconds: must be >= 0" in text
    assert "flag: gpu_slow_sample_interval_seconds: must be >= gpu_sample_interval_seconds" in text
