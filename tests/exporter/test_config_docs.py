"""The exporters' config examples in docs/configuration.md load as they are written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from exporter import config as node_config
from exporter.fabric import config as fabric_config
from exporter.fabric import names
from exporter.scheduler import config as scheduler_config
from foundation.settings import CommandSettings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _section(heading: str) -> str:
    page = PAGE.read_text()
    start = page.index(heading)
    end = page.find("\n## ", start + 1)
    return page[start : end if end > 0 else len(page)]


def _load(settings: CommandSettings[Any], example: str, tmp_path: Path) -> Any:
    """Load the example with the files it names (web config, name map, slurm.conf) made in tmp_path."""
    files = {"web.yml": "", "names.yml": "0x0002c90300a1b2c3: leaf-01\n", "/etc/slurm/slurm.conf": ""}
    for name, text in files.items():
        local = tmp_path / Path(name).name
        local.write_text(text)
        example = example.replace(name, str(local))
    path = tmp_path / "config.yml"
    path.write_text(example)
    return settings.load(["--config.file", str(path)])


@pytest.mark.parametrize(
    ("heading", "settings"),
    [
        ("## Node exporter", node_config.SETTINGS),
        ("## Fabric exporter", fabric_config.SETTINGS),
        ("## Scheduler exporter", scheduler_config.SETTINGS),
    ],
)
def test_exporter_example_loads(heading: str, settings: CommandSettings[Any], tmp_path: Path) -> None:
    (example, *_) = re.findall(r"```yaml\n(.*?)```", _section(heading), re.S)
    config = _load(settings, example, tmp_path)  # an unknown key or a bad value raises ConfigError
    assert config.web_config_file == tmp_path / "web.yml"  # the file was read


def test_name_map_examples_load(tmp_path: Path) -> None:
    blocks = re.findall(r"```(?:yaml)?\n(.*?)```", _section("### The GUID-to-name map"), re.S)
    assert len(blocks) == 2
    for number, block in enumerate(blocks):
        path = tmp_path / f"names{number}"
        path.write_text(block)
        loaded = names.load_name_map(path)
        assert loaded.name("0x0002c90300a1b2c3", "desc") == "leaf-01"
        assert loaded.name("0x0002c90300a1b2c4", "desc") == "leaf-02"
