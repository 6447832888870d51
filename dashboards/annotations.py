"""Dashboard annotations: Grafana's own (annotations and alerts), and changes applied by the hooks."""

from __future__ import annotations

from typing import Any

from dashboards.panels import DATASOURCE
from dashboards.scope import scoped

CHANGES_APPLIED = "sum by (target, result) (increase(ibpool_changes_applied_total[$__rate_interval])) > 0"


def builtin() -> dict[str, Any]:
    """Grafana's built-in annotations (manual ones and alert state changes), shown by default."""
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def changes_applied() -> dict[str, Any]:
    """A mark wherever the hooks applied (or failed to apply) a change, e.g. nodes moved between pools."""
    return {
        "datasource": dict(DATASOURCE),
        "enable": True,
        "expr": scoped(CHANGES_APPLIED),
        "hide": False,
        "iconColor": "orange",
        "name": "Changes applied",
        "step": "1m",
        "tagKeys": "target,result",
        "textFormat": "{{result}}",
        "titleFormat": "{{target}}",
        "useValueForTime": False,
    }
