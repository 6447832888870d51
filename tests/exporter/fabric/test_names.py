"""GUID-to-name map files: YAML mapping or `guid name` lines; every bad entry reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.fabric.errors import NameMapError
from exporter.fabric.names import NameMap, load_name_map


def test_yaml_mapping(tmp_path: Path) -> None:
    path = tmp_path / "names.yml"
    path.write_text('0x200001: leaf-01\n"0000000000200002": leaf-02\n"0x200000": spine-01\n')
    names = load_name_map(path)
    assert names.names == {
        "0x0000000000200001": "leaf-01",
        "0x0000000000200002": "leaf-02",
        "0x0000000000200000": "spine-01",
    }
    assert names.name("0x0000000000200001", "desc") == "leaf-01"
    assert names.name("0x0000000000999999", "desc") == "desc"


def test_guid_name_lines_as_ibnetdiscover_node_name_map(tmp_path: Path) -> None:
    path = tmp_path / "node-name-map"
    path.write_text('# comment\n0x0002c90300a1b2c3 "leaf 01 (row A)"\n\n0002c90300a1b2c4 leaf-02\n')
    assert load_name_map(path).names == {
        "0x0002c90300a1b2c3": "leaf 01 (row A)",
        "0x0002c90300a1b2c4": "leaf-02",
    }


def test_every_bad_entry_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "names.yml"
    path.write_text("0x200001: leaf-01\nnot-a-guid: x\n0x200002: ''\n")
    with pytest.raises(NameMapError) as info:
        load_name_map(path)
    assert len(info.value.problems) == 2
    lines = tmp_path / "names.txt"
    lines.write_text("0x1 a\nzzz b\n0x2\n")
    with pytest.raises(NameMapError) as info:
        load_name_map(lines)
    assert [p.split(": ")[0] for p in info.value.problems] == [f"{lines}:2", f"{lines}:3"]


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(NameMapError, match="cannot read"):
        load_name_map(tmp_path / "missing")


def test_empty_map_falls_back_to_descriptions() -> None:
    assert NameMap().name("0x1", "leaf1") == "leaf1"
