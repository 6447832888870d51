"""Metric families and a fast Prometheus text-format (0.0.4) renderer.

prometheus_client's generic renderer costs about 4 us a sample; a node exporter renders a few hundred
samples on every scrape, so families here keep their samples as pre-rendered label strings and the
renderer only joins text. Label strings are memoised: the same (device, port) pairs recur every scrape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

MetricKind = Literal["gauge", "counter", "info"]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class MetricSpec:
    """One metric as the catalog defines it: name, kind, help text and label names."""

    name: str
    kind: MetricKind
    help: str
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"counter {self.name} must end in _total")
        if self.kind == "info" and not self.name.endswith("_info"):
            raise ValueError(f"info metric {self.name} must end in _info")

    @property
    def header(self) -> str:
        """The HELP and TYPE lines (info metrics are gauges of value 1 in text format 0.0.4)."""
        return _header(self.name, self.help, "gauge" if self.kind == "info" else self.kind)


@lru_cache(maxsize=512)
def _header(name: str, help_text: str, kind: str) -> str:
    escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {escaped}\n# TYPE {name} {kind}\n"


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


@lru_cache(maxsize=65536)
def render_labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`{a="x",b="y"}` for the given names and values (empty string when there are none)."""
    if not names:
        return ""
    inner = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + inner + "}"


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it (integers without a fraction, NaN, +Inf, -Inf)."""
    if type(value) is int:
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class MetricFamily:
    """The samples of one metric collected in one scrape."""

    __slots__ = ("samples", "spec")

    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self.samples: list[tuple[str, float]] = []

    def add(self, label_values: tuple[str, ...], value: float) -> None:
        """Add one sample; `label_values` follow the order of the spec's label names."""
        self.samples.append((render_labels(self.spec.labels, label_values), value))

    def add_info(self, label_values: tuple[str, ...]) -> None:
        """Add one info sample (value 1)."""
        self.samples.append((render_labels(self.spec.labels, label_values), 1))

    def __repr__(self) -> str:
        return f"MetricFamily({self.spec.name}, {len(self.samples)} samples)"


def render(families: list[MetricFamily]) -> str:
    """Text exposition of the families; families of the same name are merged under one header."""
    by_name: dict[str, list[MetricFamily]] = {}
    for family in families:
        if family.samples:
            by_name.setdefault(family.spec.name, []).append(family)
    out: list[str] = []
    append = out.append
    for name in sorted(by_name):
        group = by_name[name]
        append(group[0].spec.header)
        for family in group:
            for labels, value in family.samples:
                append(f"{name}{labels} {format_value(value)}\n")
    return "".join(out)
