"""docs/postmortem.md, where the package docstring points, names only flags `ibpool postmortem` takes, and
its YAML examples (and docs/configuration.md's) hold only keys it reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import postmortem
from foundation.settings import read_yaml_settings
from postmortem import config

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "postmortem.md"


def blocks(page: str, language: str) -> list[str]:
    """The fenced code blocks of `page` opened with ```language."""
    fenced = re.findall(r"^```(\w*)\n(.*?)^```$", page, re.S | re.M)
    return [text for lang, text in fenced if lang == language]


def test_usage_in_the_docs_names_real_flags() -> None:
    page = PAGE.read_text()
    usage, *examples = [block for block in blocks(page, "") if "ibpool postmortem" in block]
    taken = {flag for action in config.parser()._actions for flag in action.option_strings}
    named = set(re.findall(r"--[a-z][a-z.-]*", usage))
    assert len(named) >= 10
    assert named <= taken, named - taken
    assert "--config.file" in named
    for example in examples:
        named = set(re.findall(r"--[a-z][a-z.-]*", example))
        assert named <= taken, named - taken
    assert "docs/postmortem.md" in (postmortem.__doc__ or "")  # the usage and the details moved there


@pytest.mark.parametrize(("page", "heading"), [("postmortem.md", "## The configuration file"),
                                               ("configuration.md", "## `ibpool postmortem`")])  # fmt: skip
def test_the_yaml_examples_hold_only_keys_the_command_reads(page: str, heading: str, tmp_path: Path) -> None:
    text = (DOCS / page).read_text()
    section = text[text.index(heading) :]
    example = blocks(section[: section.find("\n## ", 1)], "yaml")[0]
    path = tmp_path / "postmortem.yaml"
    path.write_text(example)
    problems: list[str] = []
    values = read_yaml_settings(path, config.SETTINGS.yaml_keys, problems, config.normalise)
    assert problems == []
    assert {"prometheus_url", "db", "runbook_url", "grafana_url"} <= set(values)
