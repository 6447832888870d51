"""The examples in the package documentation stay valid."""

from __future__ import annotations

import textwrap

import yaml

import proposals
from proposals import approval_config
from proposals.approval_config import parse_approval_config
from proposals.model import from_json


def test_proposal_example_in_package_docstring_is_valid() -> None:
    doc = proposals.__doc__ or ""
    start = doc.index("Example file::") + len("Example file::")
    example = textwrap.dedent(doc[start : doc.index("`evidence` may be")])
    assert from_json(example).kind == "set_vl_weights"


def test_policy_file_example_is_valid() -> None:
    doc = approval_config.__doc__ or ""
    example = textwrap.dedent(doc[doc.index("    name:") : doc.index("Auto-approval covers")])
    config = parse_approval_config(yaml.safe_load(example), "example")
    assert config.who == "policy:night-shift"
    assert config.auto_approve.covers("set_port_group")
