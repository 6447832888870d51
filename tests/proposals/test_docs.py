"""The examples in the package documentation stay valid."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import proposals
from proposals import approval_config
from proposals.approval_config import parse_approval_config
from proposals.model import from_json

REPO = Path(__file__).resolve().parents[2]


def test_proposal_example_in_the_docs_is_valid() -> None:
    doc = (REPO / "docs" / "proposals.md").read_text()
    example = doc[doc.index("```json\n") + len("```json\n") : doc.index("```\n\n`evidence` may be")]
    assert from_json(example).kind == "set_vl_weights"
    assert "docs/proposals.md" in (proposals.__doc__ or "")


def test_policy_file_example_is_valid() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    section = page[page.index("## The approval policy file") :]
    end = section.find("\n## ")
    section = section if end < 0 else section[:end]  # up to the next section, if any
    (example,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    config = parse_approval_config(yaml.safe_load(example), "example")
    assert config.who == "policy:night-shift"
    assert config.auto_approve.covers("set_port_group")
    assert "docs/configuration.md" in (approval_config.__doc__ or "")  # the example moved there


def test_reclaim_example_in_the_docs_is_valid() -> None:
    doc = (REPO / "docs" / "proposals.md").read_text()
    (example,) = [block for block in re.findall(r"```json\n(.*?)```", doc, re.S) if '"reclaim"' in block]
    assert from_json(example).reclaim_nodes == ("gpu012",)
