"""The push's configuration: flags and YAML keys agree, checks report every problem, settings from it."""

from __future__ import annotations

import argparse
from pathlib import Path

from exporter.config import ExporterConfig
from exporter.influx.config import INFLUX_YAML_KEYS, add_influx_flags, push_settings, validate_influx
from exporter.settings import gather_settings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--config.file", dest="config_file", type=Path)
    add_influx_flags(p)
    return p


def load(argv: list[str]) -> tuple[ExporterConfig, list[str]]:
    problems: list[str] = []
    fields = [f for f, _ in INFLUX_YAML_KEYS.values()]
    values, origin = gather_settings(parser().parse_args(argv), INFLUX_YAML_KEYS, fields, problems)
    cfg = ExporterConfig(**values)

    def bad(field: str, message: str) -> None:
        problems.append(f"{origin.get(field, 'default')}: {field}: {message}")

    validate_influx(cfg, bad)
    return cfg, problems


def test_every_yaml_key_has_a_flag_and_a_field() -> None:
    dests = {a.dest for a in parser()._actions}
    fields = set(ExporterConfig.__dataclass_fields__)
    for key, (field, _) in INFLUX_YAML_KEYS.items():
        assert key.startswith("influx.")
        assert field in dests, key
        assert field in fields, key


def test_push_is_off_without_a_url() -> None:
    cfg, problems = load([])
    assert problems == []
    assert push_settings(cfg) is None


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
    settings = push_settings(cfg)
    assert settings is not None
    assert (settings.url, settings.token, settings.batch_size) == ("http://influx:8086", "s3cret", 2000)
    assert settings.spill_directory == tmp_path / "spill"
    assert (settings.spill_max_bytes, settings.retry_interval_seconds) == (1_000_000, 0.5)
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
    assert "flag: influx_url: must start with http://" in text
    assert "flag: influx_batch_size: must be > 0" in text
    assert "flag: influx_interval_seconds: must be >= 0.01" in text
    assert "flag: influx_token_file: file not found" in text
    assert "flag: influx_retry_max_seconds: must be >=" in text
