"""Panel builders in the house style: the `$datasource` variable everywhere, units always set, every query
scoped to the `cluster` and `job` variables (scope.py).

Builders return grafanalib panels without position or id; `layout.grid` places and numbers them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grafanalib.core import Panel, Stat, StateTimeline, Table, TimeSeries

from dashboards.scope import scoped

# The dashboard's `datasource` variable (variables.py): any Prometheus-type datasource, chosen on import.
DATASOURCE: Mapping[str, str] = {"type": "prometheus", "uid": "${datasource}"}

GREEN_BASE: list[dict[str, Any]] = [{"color": "green", "value": None}]


@dataclass(frozen=True)
class Q:
    """One query of a panel: PromQL, its legend, and whether it is an instant (table) query."""

    expr: str
    legend: str = ""
    instant: bool = False


def targets(queries: Sequence[Q], table: bool = False) -> list[dict[str, Any]]:
    """Grafana target objects with refIds A, B, C... in order."""
    out = []
    for i, q in enumerate(queries):
        out.append(
            {
                "datasource": dict(DATASOURCE),
                "editorMode": "code",
                "expr": scoped(q.expr),
                "format": "table" if table else "time_series",
                "instant": q.instant,
                "legendFormat": q.legend or "__auto",
                "range": not q.instant,
                "refId": chr(ord("A") + i),
            }
        )
    return out


def value_mapping(texts: Mapping[int, tuple[str, str]]) -> list[dict[str, Any]]:
    """A value-to-text mapping: number -> (text, color)."""
    options = {
        str(k): {"color": color, "index": i, "text": text}
        for i, (k, (text, color)) in enumerate(texts.items())
    }
    return [{"type": "value", "options": options}]


def timeseries(
    title: str,
    queries: Sequence[Q],
    unit: str,
    description: str = "",
    *,
    stack: bool = False,
    bars: bool = False,
    max_value: int | None = None,
) -> Any:
    """A time-series panel; ratios get a 0-1 axis through `max_value=1`."""
    return TimeSeries(
        title=title,
        description=description,
        dataSource=dict(DATASOURCE),
        targets=targets(queries),
        unit=unit,
        drawStyle="bars" if bars else "line",
        fillOpacity=60 if bars else (30 if stack else 10),
        stacking={"mode": "normal", "group": "A"} if stack else {"mode": "none", "group": "A"},
        valueMin=0,
        valueMax=max_value,
        legendDisplayMode="table",
        legendPlacement="right",
        legendCalcs=["lastNotNull", "max"],
        tooltipMode="multi",
        tooltipSort="desc",
        thresholds=GREEN_BASE,
        maxDataPoints=None,
    )


def stat(
    title: str,
    queries: Sequence[Q],
    unit: str,
    description: str = "",
    *,
    mappings: list[dict[str, Any]] | None = None,
    thresholds: list[dict[str, Any]] | None = None,
    no_value: str = "0",
) -> Any:
    """A single-value panel showing the last value."""
    return Stat(
        title=title,
        description=description,
        dataSource=dict(DATASOURCE),
        targets=targets(queries),
        format=unit,
        color={"mode": "thresholds"},
        mappings=mappings or [],
        thresholds=thresholds or GREEN_BASE,
        reduceCalc="lastNotNull",
        graphMode="area",
        noValue=no_value,
        textMode="value_and_name" if len(queries) > 1 else "auto",
        maxDataPoints=None,
    )


def table(
    title: str,
    queries: Sequence[Q],
    description: str = "",
    *,
    hide: Sequence[str] = ("Time", "__name__", "instance", "job"),
    rename: Mapping[str, str] | None = None,
    unit: str = "none",
    sort_by: str | None = None,
) -> Any:
    """An instant table; several queries are merged on their common labels."""
    transformations: list[dict[str, Any]] = []
    if len(queries) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append(
        {
            "id": "organize",
            "options": {
                "excludeByName": {name: True for name in hide},
                "indexByName": {},
                "renameByName": dict(rename or {}),
            },
        }
    )
    panel = Table(
        title=title,
        description=description,
        dataSource=dict(DATASOURCE),
        targets=targets([Q(q.expr, q.legend, instant=True) for q in queries], table=True),
        transformations=transformations,
        unit=unit,
        filterable=True,
        maxDataPoints=None,
        thresholds=GREEN_BASE,
    )
    if sort_by is not None:
        panel.extraJson = {"options": {"sortBy": [{"desc": True, "displayName": sort_by}]}}
    return panel


def state_timeline(
    title: str, queries: Sequence[Q], mappings: list[dict[str, Any]], description: str = ""
) -> Any:
    """Discrete states over time (port state, GPU up, throttling)."""
    panel = StateTimeline(
        title=title,
        description=description,
        dataSource=dict(DATASOURCE),
        targets=targets(queries),
        mappings=mappings,
        maxDataPoints=None,
        thresholds=GREEN_BASE,
    )
    panel.extraJson = {"fieldConfig": {"defaults": {"unit": "none"}}}
    return panel


class _ModernHeatmap(Panel):  # type: ignore[misc]
    """grafanalib's Heatmap writes the pre-Grafana-9 format; this one writes what `extraJson` holds."""

    def to_json_data(self) -> dict[str, Any]:
        return dict(self.panel_json({"type": "heatmap"}))


def heatmap(title: str, queries: Sequence[Q], unit: str, description: str = "") -> Any:
    """One row per series (no bucketing): cells coloured by value, e.g. congestion per switch port."""
    return _ModernHeatmap(
        title=title,
        description=description,
        dataSource=dict(DATASOURCE),
        targets=targets(queries),
        maxDataPoints=None,
        thresholds=GREEN_BASE,
        extraJson={
            "fieldConfig": {"defaults": {"unit": unit, "custom": {"scaleDistribution": {"type": "linear"}}}},
            "options": {
                "calculate": False,
                "cellGap": 1,
                "cellValues": {"unit": unit},
                "color": {
                    "exponent": 0.5,
                    "fill": "dark-orange",
                    "min": 0,
                    "mode": "scheme",
                    "reverse": False,
                    "scale": "exponential",
                    "scheme": "Oranges",
                    "steps": 64,
                },
                "legend": {"show": True},
                "rowsFrame": {"layout": "auto"},
                "showValue": "never",
                "tooltip": {"mode": "single", "showColorScale": True, "yHistogram": False},
                "yAxis": {"axisPlacement": "left", "reverse": False, "unit": "short"},
            },
        },
    )
