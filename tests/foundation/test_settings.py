"""`Option` and `CommandSettings`: one declaration gives the flag, the YAML key and the config field."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from exporter import config as node_config
from exporter.fabric import config as fabric_config
from exporter.scheduler import config as scheduler_config
from foundation.errors import ConfigError
from foundation.settings import Bad, CommandSettings, Option, add_options, yaml_keys
from simulator import node_exporter

OPTIONS = (
    Option("--a.flag", "a.on", "on", bool, "a switch"),
    Option("--a.count", "a.count", "count", int),
    Option("--a.name", "a.name", "name", str, "a name"),
    Option("--a.dir", "a.dir", "directory", Path, "a folder", aliases=("--a.folder",)),
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="x")
    add_options(p, OPTIONS)
    return p


def test_yaml_keys_map_each_key_to_field_and_type() -> None:
    assert yaml_keys(OPTIONS) == {
        "a.on": ("on", bool),
        "a.count": ("count", int),
        "a.name": ("name", str),
        "a.dir": ("directory", Path),
    }


def test_flags_default_to_none_so_yaml_can_fill_them() -> None:
    args = parser().parse_args([])
    assert vars(args) == {"on": None, "count": None, "name": None, "directory": None}


def test_flags_parse_by_kind_with_aliases_and_negation() -> None:
    args = parser().parse_args(["--no-a.flag", "--a.count", "3", "--a.name", "n", "--a.folder", "d"])
    assert (args.on, args.count, args.name, args.directory) == (False, 3, "n", Path("d"))
    assert parser().parse_args(["--a.flag"]).on is True
    with pytest.raises(SystemExit):
        parser().parse_args(["--a.count", "x"])


@pytest.mark.parametrize("module", [node_config, fabric_config, scheduler_config, node_exporter])
def test_every_yaml_field_has_a_flag_and_every_flag_a_yaml_field(module: Any) -> None:
    settings = module.SETTINGS
    dests = {a.dest for a in settings.parser()._actions} - {"help", "config_file"}
    assert dests == {field for field, _ in settings.yaml_keys.values()}


@dataclass(frozen=True)
class Section:
    size: int = 1
    name: str = "x"


@dataclass(frozen=True)
class Demo:
    listen_address: str = ":1"
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    log_level: str = "info"
    count: int = 0
    section: Section = field(default_factory=Section)


def _demo_checks(cfg: Demo, bad: Bad) -> None:
    if cfg.count < 0:
        bad("count", "must be >= 0")
    if cfg.section.size > 10:
        bad("section.size", "must be <= 10")


DEMO = CommandSettings(
    prog="demo",
    description="a demo",
    config_type=Demo,
    options=(
        Option("--count", "count", "count", int, hidden=("--old-count",)),
        Option("--section.size", "section.size", "section.size", int),
        Option("--section.name", "section.name", "section.name", str),
    ),
    validate=_demo_checks,
    default_listen=":1",
)


def test_settings_fill_nested_sections_from_yaml_and_flags(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text("section: {name: y, size: 3}\ncount: 2\n")
    cfg = DEMO.load(["--config.file", str(config), "--section.size", "4"])
    assert cfg == Demo(count=2, section=Section(size=4, name="y"))
    assert DEMO.load([]) == Demo()


def test_settings_report_every_problem_with_its_origin(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text("count: -1\nnope: 1\nweb: {listen_address: 'no port'}\n")
    with pytest.raises(ConfigError) as caught:
        DEMO.load(["--config.file", str(config), "--section.size", "11", "--log.level", "loud"])
    problems = caught.value.problems
    assert f"{config}: nope: unknown key" in problems
    assert f"{config}: count: must be >= 0" in problems
    assert "flag: section.size: must be <= 10" in problems
    assert any(p.startswith(f"{config}: listen_address:") for p in problems)
    assert any(p.startswith("flag: log_level: must be one of") for p in problems)
    assert len(problems) == 5


def test_hidden_aliases_parse_but_stay_out_of_help() -> None:
    assert DEMO.load(["--old-count", "3"]).count == 3
    assert "--old-count" not in DEMO.parser().format_help()
    assert "--count" in DEMO.parser().format_help()
