"""The dashboard shell every ibpool dashboard shares: stable uid, tags, time, the scope variables
($datasource, $cluster, $job) first, Grafana's and the changes-applied annotations, links to the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grafanalib.core import (
    GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
    Annotations,
    Dashboard,
    DashboardLink,
    Templating,
    Time,
)

from dashboards.annotations import builtin, changes_applied
from dashboards.layout import Row, grid
from dashboards.variables import scope_variables

SCHEMA_VERSION = 39  # Grafana 10.4 / 11: newer than grafanalib's default, so no old-schema migrations run
TAGS = ["ibpool"]


def dashboard(
    uid: str,
    title: str,
    description: str,
    rows: Sequence[Row],
    *,
    variables: Sequence[Any] = (),
) -> Any:
    """A dashboard with a fixed uid, UTC time, shared crosshair and rows laid out on the grid."""
    return Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=TAGS,
        panels=grid(rows),
        templating=Templating(list=[*scope_variables(), *variables]),
        annotations=Annotations(list=[builtin(), changes_applied()]),
        links=[
            DashboardLink(
                title="ibpool",
                type="dashboards",
                tags=TAGS,
                asDropdown=True,
                includeVars=True,
                keepTime=True,
            )
        ],
        time=Time("now-6h", "now"),
        refresh="1m",
        timezone="utc",
        graphTooltip=GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        schemaVersion=SCHEMA_VERSION,
        editable=False,
    )
