"""The config examples in the documentation parse."""

from __future__ import annotations

import re
import textwrap
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


def test_package_docstring_example() -> None:
    doc = scheduler_hooks.__doc__ or ""
    start = doc.index("exit 2::") + len("exit 2::")
    _check(textwrap.dedent(doc[start : doc.index("Flow with")]).replace("approval_config:", "#"))


def test_module_docstring_example() -> None:
    doc = config_module.__doc__ or ""
    _check(doc[doc.index("```yaml") + 7 : doc.rindex("```")].replace("approval_config:", "#"))
