"""The config examples in the documentation parse."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import scheduler_hooks
from scheduler_hooks.apply import config as config_module
from scheduler_hooks.apply.config import parse_apply_config

DOCS = Path(__file__).resolve().parents[3] / "docs" / "apply.md"


def _check(text: str) -> None:
    config = parse_apply_config(yaml.safe_load(text), "example")
    assert config.sections == ("opensm", "slurm")
    assert config.slurm is not None and config.slurm.persist


def test_docs_example() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    assert len(blocks) == 1
    _check(blocks[0].replace("approval_config: /etc/ibpool/approval.yaml", ""))


def test_package_docstring_points_at_the_docs() -> None:
    assert "docs/apply.md" in (scheduler_hooks.__doc__ or "")  # the example moved there (tested above)


def test_module_docstring_example() -> None:
    doc = config_module.__doc__ or ""
    _check(doc[doc.index("```yaml") + 7 : doc.rindex("```")].replace("approval_config:", "#"))
