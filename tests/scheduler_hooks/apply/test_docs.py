"""The config examples in the documentation parse."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import yaml

import scheduler_hooks
from scheduler_hooks.apply import config as config_module
from scheduler_hooks.apply.config import parse_apply_config
from scheduler_hooks.opensm import config as opensm_config_module
from scheduler_hooks.slurm import SlurmConfig

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _apply_example() -> str:
    page = (DOCS / "configuration.md").read_text()
    section = page[page.index("## `ibpool apply`") :]
    section = section[: section.index("\n## ")]  # up to the next section
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    return str(blocks[0])


def test_docs_example() -> None:
    example = _apply_example().replace("approval_config: /etc/ibpool/approval.yaml", "")
    config = parse_apply_config(yaml.safe_load(example), "example")
    assert config.sections == ("opensm", "slurm")
    assert config.slurm is not None and config.slurm.persist
    assert config.opensm is not None and config.opensm.diag.ca == "mlx5_0"  # the opensm section has every key


def test_docs_example_shows_every_slurm_key() -> None:
    section = yaml.safe_load(_apply_example())["slurm"]
    assert sorted(section) == sorted(field.name for field in fields(SlurmConfig))
    assert section["reclaims"] == "as_drain"  # the default: killing work is opted into


def test_docstrings_point_at_the_docs() -> None:
    assert "docs/apply.md" in (scheduler_hooks.__doc__ or "")
    assert "docs/configuration.md" in (config_module.__doc__ or "")  # the example moved there (tested above)
    assert "docs/configuration.md" in (opensm_config_module.__doc__ or "")
    assert "docs/configuration.md" in (DOCS / "apply.md").read_text()
