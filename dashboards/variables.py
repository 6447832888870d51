"""Template variables: the datasource, the cluster and scrape-job scope, label_values ones, the tick size."""

from __future__ import annotations

from typing import Any

from grafanalib.core import REFRESH_ON_TIME_RANGE_CHANGE, SORT_ALPHA_ASC, Template

from dashboards.panels import DATASOURCE
from dashboards.scope import CLUSTER, scoped

DEFAULT_TICK_BYTES = 256
ALL = {"selected": True, "text": ["All"], "value": ["$__all"]}


def datasource() -> Any:
    """`$datasource`: any Prometheus-type datasource (Prometheus, Thanos, Mimir, VictoriaMetrics)."""
    var = Template(name="datasource", label="Data source", query="prometheus", type="datasource")
    var._current = {}  # Grafana picks the default Prometheus datasource
    return var


def label_values(
    name: str,
    selector: str,
    label: str,
    *,
    title: str,
    multi: bool = True,
    all_value: str | None = ".*",
    scope: tuple[str, ...] | None = None,
) -> Any:
    """A query variable listing the values of `label` on the series `selector`, scoped like the panels
    (or with the matchers of `scope`).

    With `all_value=None`, "All" expands to the listed values (a dependent variable keeps its scope).
    """
    var = Template(
        name=name,
        label=title,
        query=f"label_values({scoped(selector, scope)}, {label})",
        dataSource=dict(DATASOURCE),
        multi=multi,
        includeAll=multi,
        allValue=all_value if multi else None,
        refresh=REFRESH_ON_TIME_RANGE_CHANGE,
        sort=SORT_ALPHA_ASC,
    )
    if multi:
        var._current = dict(ALL)
    return var


def scope_variables() -> list[Any]:
    """`$datasource`, then `$cluster` (the `cluster` label of any target) and `$job` (its scrape jobs)."""
    return [
        datasource(),
        label_values("cluster", "up", "cluster", title="Cluster", scope=()),
        label_values("job", "up", "job", title="Job", scope=(CLUSTER,)),
    ]


def tick_bytes() -> Any:
    """Bytes one transmit-wait tick stands for (device-model dependent); an operator may override it."""
    value = str(DEFAULT_TICK_BYTES)
    return Template(
        name="tick_bytes", label="IB wait tick (bytes)", query=value, default=value, type="textbox"
    )
