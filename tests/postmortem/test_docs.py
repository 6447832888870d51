"""docs/postmortem.md, where the package docstring points, names only flags `ibpool postmortem` takes."""

from __future__ import annotations

import re
from pathlib import Path

import postmortem
from postmortem import config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "postmortem.md"


def test_usage_in_the_docs_names_real_flags() -> None:
    page = PAGE.read_text()
    (usage,) = [block for block in re.findall(r"```\n(.*?)```", page, re.S) if "ibpool postmortem" in block]
    named = set(re.findall(r"--[a-z][a-z.-]*", usage))
    taken = {flag for action in config.parser()._actions for flag in action.option_strings}
    assert len(named) >= 10
    assert named <= taken, named - taken
    assert "docs/postmortem.md" in (postmortem.__doc__ or "")  # the usage and the details moved there
