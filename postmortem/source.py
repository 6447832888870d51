"""Where a live system's series come from: one interface for every store, and the selectors it answers.

A report (and the rule replay's copy) asks a `SeriesSource` for series by `Selector`: a metric name and
equality matchers, e.g. `ALERTS{alertstate="firing"}`, over a window at a step. Every source turns the
same selector into its own query: PromQL `query_range` for Prometheus, VictoriaMetrics and other PromQL
endpoints (`postmortem.prometheus`), Flux for InfluxDB 2 (`postmortem.influxdb`). A source answers
(labels, points) per series with the name as `__name__`, points sorted, NaN left out; `names` lists the
metric names it holds in a window. Failures raise `InputError` with the store and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from postmortem.model import Point

Series = list[tuple[dict[str, str], list[Point]]]


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass(frozen=True)
class Selector:
    """A metric name and label matchers (`label == value`), the one kind of query a report makes."""

    name: str
    matchers: tuple[tuple[str, str], ...] = ()

    def promql(self) -> str:
        """The selector in PromQL: `name{k="v",...}`."""
        if not self.matchers:
            return self.name
        return self.name + "{" + ",".join(f"{k}={_quoted(v)}" for k, v in self.matchers) + "}"

    def __str__(self) -> str:
        return self.promql()


class SeriesSource(Protocol):
    """A store a report can read (see the module docstring)."""

    @property
    def where(self) -> str:
        """The store, for the report ("VictoriaMetrics at http://...")."""
        ...

    def names(self, start: float, end: float) -> set[str]:
        """The metric names with samples in [start, end] (a superset is fine)."""
        ...

    def select(self, selector: Selector, start: float, end: float, step: float) -> Series:
        """The selected series over [start, end] sampled every `step` seconds."""
        ...
