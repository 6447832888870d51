"""The push's configuration: flags and YAML keys agree, checks report every problem, settings from it."""

from __future__ import annotations

from pathlib import Path

from exporter.config import SETTINGS, ExporterConfig
from exporter.influx.config import INFLUX_OPTIONS, push_settings
from exporter.influx.settings import PushSettings
from foundation.errors import ConfigError


def load(argv: list[str]) -> tuple[ExporterConfig, list[str]]:
    try:
        return SETTINGS.load(argv), []
    except ConfigError as exc:
        return ExporterConfig(), exc.problems


def test_every_influx_option_has_a_flag_and_a_settings_field() -> None:
    dests = {a.dest for a in SETTINGS.parser()._actions}
    fields = set(PushSettings.__dataclass_fields__)
    for option in INFLUX_OPTIONS:
        assert option.yaml_key.startswith("influx.")
        assert option.field in dests, option.yaml_key
        section, _, name = option.field.partition(".")
        assert section == "influx" and name in fields, option.yaml_key


def test_push_is_off_without_a_url() -> None:
    cfg, problems = load([])
    assert problems == []
    assert push_settings(cfg.influx) is None


def test_yaml_then_flags_make_the_settings(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    config = tmp_path / "exporter.yml"
    config.write_text(
        "influx:\n  url: http://influx:8086\n  token_file: token\n  batch_size: 2000\n"
        "  spill: {directory: spill, max_bytes: 1000000}\n  retry: {initial_seconds: 0.5}\n"
    )
    cfg, problems = load(["--config.file", str(config), "--influx.interval-seconds", "2", "--influx.gzip"])
    assert problems == []
    settings = push_settings(cfg.influx)
    assert settings is not None
    assert (settings.url, settings.token, settings.batch_size) == ("http://influx:8086", "s3cret", 2000)
    assert settings.spill_directory == tmp_path / "spill"
    assert (settings.spill_max_bytes, settings.retry_initial_seconds) == (1_000_000, 0.5)
    assert (settings.interval_seconds, settings.gzip) == (2.0, True)


def test_every_problem_is_reported_with_its_origin(tmp_path: Path) -> None:
    argv = [
        "--influx.url",
        "influx:8086",
        "--influx.batch-size",
        "0",
        "--influx.interval-seconds",
        "0.001",
        "--influx.token-file",
        str(tmp_path / "missing"),
        "--influx.retry-max-seconds",
        "0.1",
    ]
    _, problems = load(argv)
    text = "\n".join(problems)
    assert "flag: influx.url: must start with http://" in text
    assert "flag: influx.batch_size: must be > 0" in text
    assert "flag: influx.interval_seconds: must be >= 0.01" in text
    assert "flag: influx.token_file: file not found" in text
    assert "flag: influx.retry_max_seconds: must be >=" in text
