"""The exporters' config examples in docs/configuration.md load as they are written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from exporter import config as node_config
from exporter.fabric import config as fabric_config
from exporter.fabric import names
from exporter.influx import config as influx_config
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


def test_influx_example_loads(tmp_path: Path) -> None:
    (example,) = re.findall(r"```yaml\n(.*?)```", _section("### The InfluxDB push"), re.S)
    token = tmp_path / "influx-token"
    token.write_text("secret\n")
    config = _load(node_config.SETTINGS, example.replace("/etc/ibpool/influx-token", str(token)), tmp_path)
    assert config.influx.url == "http://victoria-metrics:8428"
    assert config.influx.spill_max_bytes == 1 << 30
    assert config.influx.retry_max_seconds == 60.0
    assert config.influx.labels == "cluster=gpu-a"
    assert "docs/configuration.md" in (influx_config.__doc__ or "")  # the example moved there
