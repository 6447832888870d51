"""Every query of every dashboard (panels, variables, annotations), for tests that run them in Prometheus.

for q in all_queries():
    promql = q.promql()          # variables substituted: regex ones by `.*`, $__rate_interval by 1m
    # GET /api/v1/query?query=<promql>; for kind == "variable", q.label names the label listed
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dashboards.build import as_dicts
from dashboards.promql import BUILTIN_VARIABLES, parse_label_values, substitute

Kind = Literal["panel", "variable", "annotation"]


@dataclass(frozen=True)
class Query:
    """One query as Grafana sends it, with where it comes from."""

    dashboard_uid: str
    title: str  # panel title, variable name or annotation name
    kind: Kind
    ref_id: str
    expr: str  # PromQL with Grafana variables; for a variable, the series selector of label_values()
    instant: bool = False
    label: str = ""  # for a variable: the label whose values it lists
    values: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def promql(self, rate_interval: str = "1m", overrides: Mapping[str, str] | None = None) -> str:
        """The query ready for Prometheus: dashboard variables, then built-ins, then `overrides` applied."""
        values = {name: rate_interval for name in BUILTIN_VARIABLES}
        values.update(self.values)
        values.update(overrides or {})
        return substitute(self.expr, values)


def _sample_values(board: Mapping[str, Any]) -> dict[str, str]:
    """Query variables match anything (`.*`, used with `=~` only); the datasource and text variables keep
    their query (the datasource one is never in a query)."""
    out = {}
    for var in board["templating"]["list"]:
        out[var["name"]] = ".*" if var["type"] == "query" else str(var["query"])
    return out


def _panels(panels: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries(uid: str, board: Mapping[str, Any]) -> list[Query]:
    """The queries of one dashboard (as JSON)."""
    values = _sample_values(board)
    out = []
    for panel in _panels(board["panels"]):
        for t in panel.get("targets", []):
            out.append(
                Query(uid, panel["title"], "panel", t["refId"], t["expr"], t["instant"], values=values)
            )
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            parsed = parse_label_values(var["query"])
            if parsed is None:
                raise ValueError(f"{uid}: variable {var['name']} is not label_values(selector, label)")
            out.append(Query(uid, var["name"], "variable", var["name"], parsed[0], True, parsed[1], values))
    for ann in board["annotations"]["list"]:
        if ann.get("builtIn"):
            continue  # Grafana's own annotations: no query
        out.append(Query(uid, ann["name"], "annotation", ann["name"], ann["expr"], values=values))
    return out


def all_queries() -> list[Query]:
    """Every query of every dashboard, in dashboard and panel order."""
    return [q for uid, board in as_dicts().items() for q in dashboard_queries(uid, board)]
