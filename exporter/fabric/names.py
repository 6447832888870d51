"""The optional GUID-to-name map: names that replace the fabric's node descriptions in `node_desc`.

A YAML mapping or `guid name` lines (ibnetdiscover's `--node-name-map` format); both, with examples:
docs/configuration.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from exporter.fabric.errors import NameMapError
from exporter.fabric.model import format_guid

_LINE = re.compile(r'^(?P<guid>(?:0x)?[0-9a-fA-F]{1,16})\s+(?:"(?P<quoted>.*)"|(?P<plain>\S.*?))\s*$')
_HEX = re.compile(r"^(?:0x)?[0-9a-fA-F]{1,16}$")


@dataclass(frozen=True)
class NameMap:
    """GUID -> name; `name` falls back to the node description."""

    names: Mapping[str, str] = field(default_factory=dict)

    def name(self, guid: str, description: str) -> str:
        """The configured name of `guid`, else its node description."""
        return self.names.get(guid, description)


def _guid(key: object) -> str | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return format_guid(key) if 0 <= key < 1 << 64 else None
    if isinstance(key, str) and _HEX.match(key.strip()):
        return format_guid(int(key.strip().removeprefix("0x"), 16))
    return None


def _from_mapping(raw: Mapping[object, object], where: str, problems: list[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    for key, value in raw.items():
        guid = _guid(key)
        if guid is None:
            problems.append(f"{where}: {key!r}: not a GUID")
        elif not isinstance(value, str | int) or isinstance(value, bool) or not str(value).strip():
            problems.append(f"{where}: {key!r}: the name must be a non-empty string")
        else:
            names[guid] = str(value).strip()
    return names


def _from_lines(text: str, where: str, problems: list[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        name = (match.group("quoted") or match.group("plain") or "").strip() if match else ""
        if match is None or not name:
            problems.append(f"{where}:{number}: expected `GUID name`, got {line[:80]!r}")
            continue
        names[format_guid(int(match.group("guid").removeprefix("0x"), 16))] = name
    return names


def load_name_map(path: Path) -> NameMap:
    """Read `path` (YAML mapping or `guid name` lines); raise NameMapError listing every bad entry."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise NameMapError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    problems: list[str] = []
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        raw = None
    if isinstance(raw, dict):
        names = _from_mapping(raw, str(path), problems)
    else:
        names = _from_lines(text, str(path), problems)
    if problems:
        raise NameMapError(problems)
    return NameMap(names)
