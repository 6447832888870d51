"""House style (docs/architecture.md §3): stable uids, the $datasource variable, $__rate_interval, units."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from dashboards.build import JSON_DIR, as_dicts
from dashboards.panels import DATASOURCE
from dashboards.promql import BUILTIN_VARIABLES, range_selectors, variables
from dashboards.queries import Query, all_queries

UIDS = {"ibpool-fleet", "ibpool-pool", "ibpool-node", "ibpool-fabric", "ibpool-decisions"}
BOARDS = as_dicts()
QUERIES = all_queries()


def _panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _datasources(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from _datasources(value)
    elif isinstance(node, list):
        for item in node:
            yield from _datasources(item)


def _qid(q: Query) -> str:
    return f"{q.dashboard_uid}/{q.title}/{q.ref_id}"


def test_uids_are_the_stable_ones_and_name_the_files() -> None:
    assert set(BOARDS) == UIDS
    assert {p.stem for p in JSON_DIR.glob("*.json")} == UIDS
    for uid in UIDS:
        assert json.loads((JSON_DIR / f"{uid}.json").read_text())["uid"] == uid
        assert re.fullmatch(r"ibpool-[a-z]+", uid) and len(uid) <= 40


@pytest.mark.parametrize("uid", sorted(UIDS))
def test_only_the_datasource_variable_is_used(uid: str) -> None:
    board = BOARDS[uid]
    builtin = [a for a in board["annotations"]["list"] if a.get("builtIn")]
    grafana = [a["datasource"] for a in builtin]
    assert all(ds is None or ds == DATASOURCE or ds in grafana for ds in _datasources(board))
    for panel in _panels(board):
        if panel["type"] != "row":
            assert panel["datasource"] == DATASOURCE, panel["title"]
            assert panel["targets"], f"{panel['title']} has no query"
            assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == DATASOURCE, var["name"]
    for ann in board["annotations"]["list"]:
        if not ann.get("builtIn"):
            assert ann["datasource"] == DATASOURCE, ann["name"]


@pytest.mark.parametrize("query", QUERIES, ids=_qid)
def test_every_range_is_rate_interval(query: Query) -> None:
    assert all(r == "$__rate_interval" for r in range_selectors(query.expr)), query.expr
    if re.search(r"\b(rate|irate|increase)\s*\(", query.expr):
        assert range_selectors(query.expr), query.expr


@pytest.mark.parametrize("query", QUERIES, ids=_qid)
def test_variables_are_defined_and_only_used_in_regex_matchers(query: Query) -> None:
    defined = {v["name"] for v in BOARDS[query.dashboard_uid]["templating"]["list"]}
    assert variables(query.expr) <= defined | set(BUILTIN_VARIABLES), query.expr
    for matcher in re.findall(r'\w+\s*(?:!=|!~|=~|=)\s*"[^"]*\$[^"]*"', query.expr):
        assert "=~" in matcher, f"{matcher}: a variable must be matched with =~ (`.*` stands for All)"


@pytest.mark.parametrize("uid", sorted(UIDS))
def test_panels_have_units_unique_titles_ids_and_fit_the_grid(uid: str) -> None:
    panels = list(_panels(BOARDS[uid]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    titles = [p["title"] for p in panels if p["type"] != "row"]
    assert len(titles) == len(set(titles)), "panel titles name queries in reports, keep them unique"
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] not in ("row", "table"):
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']} has no unit"


def test_units_follow_the_metrics() -> None:
    units = {}
    for board in BOARDS.values():
        for panel in _panels(board):
            if panel["type"] not in ("row", "table"):
                units[panel["title"]] = panel["fieldConfig"]["defaults"]["unit"]
    assert units["Memory used"] == "bytes"
    assert units["Power"] == "watt"
    assert units["Temperature"] == "celsius"
    assert units["Utilization"] == "percentunit"
    assert units["Congestion by switch and port"] == "percentunit"
    assert units["Throughput against link rate"] == "Bps"


def test_pool_node_and_device_variables_exist() -> None:
    names = {uid: {v["name"] for v in b["templating"]["list"]} for uid, b in BOARDS.items()}
    assert "pool" in names["ibpool-fleet"] and "pool" in names["ibpool-pool"]
    assert {"node", "gpu", "device"} <= names["ibpool-node"]
    assert "switch" in names["ibpool-fabric"]


def test_moves_are_annotations_on_the_pool_dashboard() -> None:
    (ann,) = [a for a in BOARDS["ibpool-pool"]["annotations"]["list"] if not a.get("builtIn")]
    assert "ibpool_changes_applied_total" in ann["expr"] and "increase(" in ann["expr"]
