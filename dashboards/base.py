"""The dashboard shell every ibpool dashboard shares: stable uid, tags, time, variables, layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grafanalib.core import GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR, Annotations, Dashboard, Templating, Time

from dashboards.layout import Row, grid

SCHEMA_VERSION = 39  # Grafana 10.4 / 11: newer than grafanalib's default, so no old-schema migrations run
TAGS = ["ibpool"]


def dashboard(
    uid: str,
    title: str,
    description: str,
    rows: Sequence[Row],
    *,
    variables: Sequence[Any] = (),
    annotations: Sequence[dict[str, Any]] = (),
) -> Any:
    """A dashboard with a fixed uid, UTC time, shared crosshair and rows laid out on the grid."""
    return Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=TAGS,
        panels=grid(rows),
        templating=Templating(list=list(variables)),
        annotations=Annotations(list=list(annotations)),
        time=Time("now-6h", "now"),
        refresh="1m",
        timezone="utc",
        graphTooltip=GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        schemaVersion=SCHEMA_VERSION,
        editable=False,
    )
