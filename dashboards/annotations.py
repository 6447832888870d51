"""Dashboard annotations drawn from Prometheus series."""

from __future__ import annotations

from typing import Any

from dashboards.panels import DATASOURCE

CHANGES_APPLIED = "sum by (target, result) (increase(ibpool_changes_applied_total[$__rate_interval])) > 0"


def changes_applied() -> dict[str, Any]:
    """A mark wherever the hooks applied (or failed to apply) a change, e.g. nodes moved between pools."""
    return {
        "datasource": dict(DATASOURCE),
        "enable": True,
        "expr": CHANGES_APPLIED,
        "hide": False,
        "iconColor": "orange",
        "name": "Changes applied",
        "step": "1m",
        "tagKeys": "target,result",
        "textFormat": "{{result}}",
        "titleFormat": "{{target}}",
        "useValueForTime": False,
    }
