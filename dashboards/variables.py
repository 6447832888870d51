"""Template variables: label_values queries on the provisioned datasource, and the IB tick size."""

from __future__ import annotations

from typing import Any

from grafanalib.core import REFRESH_ON_TIME_RANGE_CHANGE, SORT_ALPHA_ASC, Template

from dashboards.panels import DATASOURCE

DEFAULT_TICK_BYTES = 256


def label_values(
    name: str, selector: str, label: str, *, title: str, multi: bool = True, all_value: str | None = ".*"
) -> Any:
    """A query variable listing the values of `label` on the series `selector`.

    With `all_value=None`, "All" expands to the listed values (a dependent variable keeps its scope).
    """
    var = Template(
        name=name,
        label=title,
        query=f"label_values({selector}, {label})",
        dataSource=dict(DATASOURCE),
        multi=multi,
        includeAll=multi,
        allValue=all_value if multi else None,
        refresh=REFRESH_ON_TIME_RANGE_CHANGE,
        sort=SORT_ALPHA_ASC,
    )
    if multi:
        var._current = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return var


def tick_bytes() -> Any:
    """Bytes one transmit-wait tick stands for (device-model dependent); an operator may override it."""
    value = str(DEFAULT_TICK_BYTES)
    return Template(
        name="tick_bytes", label="IB wait tick (bytes)", query=value, default=value, type="textbox"
    )
