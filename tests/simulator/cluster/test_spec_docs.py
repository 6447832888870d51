"""The spec example in docs/simulator.md loads as it is written."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from simulator.cluster import spec as spec_module
from simulator.cluster.spec import spec_from_dict

PAGE = Path(__file__).resolve().parents[3] / "docs" / "simulator.md"


def test_spec_example_loads() -> None:
    page = PAGE.read_text()
    section = page[page.index("### The spec") : page.index("### Assumptions")]
    (example,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    spec = spec_from_dict(yaml.safe_load(example), "docs/simulator.md")
    assert [pool.name for pool in spec.pools] == ["recsys", "llm"]
    assert spec.fabric.link_bytes_per_second == 5.0e10
    assert spec.seed == 7
    assert "docs/simulator.md" in (spec_module.__doc__ or "")
