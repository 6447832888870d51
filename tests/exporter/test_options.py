"""`Option`: one declaration gives both the flag and the YAML key."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from exporter import config as node_config
from exporter.fabric import config as fabric_config
from exporter.scheduler import config as scheduler_config
from exporter.settings import Option, add_options, yaml_keys

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


@pytest.mark.parametrize("module", [node_config, fabric_config, scheduler_config])
def test_every_yaml_field_has_a_flag_and_every_flag_a_yaml_field(module: Any) -> None:
    dests = {a.dest for a in module.build_parser()._actions} - {"help", "config_file"}
    assert dests == {field for field, _ in module._YAML_KEYS.values()}
