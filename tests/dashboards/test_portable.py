"""The committed dashboard JSON imports anywhere: no fixed datasource, scope variables, annotations, links.

Reads dashboards/json/*.json as Grafana imports them. Every dashboard must: name no datasource uid but
its `$datasource` variable (a `datasource`-type variable over Prometheus-type datasources); begin with the
`datasource`, `cluster` and `job` variables, every query scoped by them; carry Grafana's built-in
annotations and the "Changes applied" one; link to the other ibpool dashboards, keeping time and
variables. The drill-down links (fleet -> pool -> node, fabric port -> node) must open a dashboard that
exists, set a variable that dashboard has, and keep the datasource, cluster, job and time range.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from dashboards.build import JSON_DIR
from dashboards.queries import dashboard_queries

BOARDS: dict[str, dict[str, Any]] = {
    p.stem: json.loads(p.read_text()) for p in sorted(JSON_DIR.glob("*.json"))
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_LINK = re.compile(
    r"^/d/(?P<uid>[\w-]+)/[\w-]+\?var-(?P<var>\w+)=\$\{__(?:field\.labels|data\.fields)\.(?P<label>\w+)\}&(?P<rest>.*)$"
)
DRILL_DOWNS = {
    ("ibpool-fleet", "ibpool-pool", "pool"),
    ("ibpool-pool", "ibpool-node", "node"),
    ("ibpool-fabric", "ibpool-node", "node"),
}


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def data_links(board: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, link) for every data link of every panel."""
    for panel in _panels(board):
        for link in panel.get("fieldConfig", {}).get("defaults", {}).get("links", []):
            yield panel, link


def test_every_dashboard_is_there() -> None:
    assert set(BOARDS) == {"ibpool-fleet", "ibpool-pool", "ibpool-node", "ibpool-fabric", "ibpool-decisions"}


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_no_fixed_datasource(uid: str) -> None:
    board = BOARDS[uid]
    text = json.dumps(board)
    assert "ibpool-prometheus" not in text
    builtin = {"type": "grafana", "uid": "-- Grafana --"}
    for key, value in _walk(board):
        if key == "datasource" and value is not None:
            assert value in (DATASOURCE, builtin), value
    assert board.get("__inputs", []) == [], "a datasource variable, not an import-time input"


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_scope_variables_come_first_and_scope_every_query(uid: str) -> None:
    board = BOARDS[uid]
    variables = board["templating"]["list"]
    source, cluster, job = variables[:3]
    assert (source["name"], source["type"], source["query"]) == ("datasource", "datasource", "prometheus")
    assert (cluster["name"], cluster["query"]) == ("cluster", "label_values(up, cluster)")
    assert (job["name"], job["query"]) == ("job", 'label_values(up{cluster=~"$cluster"}, job)')
    for var in (cluster, job):
        assert var["type"] == "query" and var["multi"] and var["includeAll"] and var["allValue"] == ".*"
        assert var["datasource"] == DATASOURCE
    for query in dashboard_queries(uid, board):
        if query.kind == "variable" and query.title in ("cluster", "job"):
            continue
        assert 'cluster=~"$cluster"' in query.expr, (query.title, query.expr)


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_builtin_and_changes_applied_annotations(uid: str) -> None:
    annotations = {a["name"]: a for a in BOARDS[uid]["annotations"]["list"]}
    assert set(annotations) == {"Annotations & Alerts", "Changes applied"}
    assert annotations["Annotations & Alerts"]["builtIn"] == 1
    changes = annotations["Changes applied"]
    assert changes["datasource"] == DATASOURCE and "ibpool_changes_applied_total" in changes["expr"]


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_links_to_the_other_dashboards_keep_time_and_variables(uid: str) -> None:
    (link,) = BOARDS[uid]["links"]
    assert link["type"] == "dashboards" and link["tags"] == ["ibpool"]
    assert link["keepTime"] and link["includeVars"] and link["asDropdown"]
    assert all("ibpool" in board["tags"] for board in BOARDS.values())


def test_drill_downs_open_existing_dashboards_with_their_variables() -> None:
    found = set()
    for uid, board in BOARDS.items():
        for panel, link in data_links(board):
            match = _LINK.match(link["url"])
            assert match, link["url"]
            target = match["uid"]
            assert target in BOARDS, link["url"]
            names = {v["name"] for v in BOARDS[target]["templating"]["list"]}
            assert match["var"] in names, f"{target} has no variable {match['var']}"
            rest = match["rest"].split("&")
            assert rest == [
                "${datasource:queryparam}",
                "${cluster:queryparam}",
                "${job:queryparam}",
                "${__url_time_range}",
            ]
            # the value comes from a label every query of the panel keeps
            for target_query in panel["targets"]:
                expr = target_query["expr"]
                assert match["label"] in expr or match["label"] in target_query["legendFormat"], expr
            found.add((uid, target, match["var"]))
    assert found == DRILL_DOWNS


def test_the_loader_reads_what_was_generated() -> None:
    from dashboards.build import rendered  # noqa: PLC0415 (the generator, to prove the files are current)

    assert {name.removesuffix(".json"): json.loads(text) for name, text in rendered().items()} == BOARDS
