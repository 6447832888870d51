"""The dashboards read the recording rules and external metrics that alerts/ defines, under those names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import metrics
from dashboards.build import as_dicts
from dashboards.metrics import DERIVED, EXTERNAL_METRICS, RECORDING_RULES_USED
from dashboards.promql import metric_names, variables
from dashboards.queries import Query, all_queries, dashboard_queries
from tests.alerts.promql import selectors

ALERTS = Path(__file__).resolve().parents[2] / "alerts"
TARGET_LABELS = {"job", "instance", "cluster"}
# Output labels of each rule level (alerts/recording_rules.yml, header comment).
LEVEL_LABELS = {
    "fleet": set(),
    "hca_type": {"hca_type"},
    "port": {"cluster", "node", "instance", "job", "device", "port"},
    "fabric_port": {"cluster", "instance", "job", "node_guid", "port", "node_desc"},
    "fabric_port_vl": {"cluster", "instance", "job", "node_guid", "port", "node_desc", "vl"},
    "pool": {"cluster", "pool"},
}


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def recorded_names() -> set[str]:
    """Every `record:` name in alerts/recording_rules.yml."""
    groups = _load(ALERTS / "recording_rules.yml")["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


def external_metrics() -> dict[str, set[str]]:
    """alerts/external/metrics.yaml: name -> its labels."""
    return {m["name"]: set(m["labels"]) for m in _load(ALERTS / "external" / "metrics.yaml")["metrics"]}


def _qid(q: Query) -> str:
    return f"{q.dashboard_uid}/{q.title}/{q.ref_id}"


QUERIES = all_queries()


def test_every_recording_rule_a_dashboard_names_is_defined_in_alerts() -> None:
    defined = recorded_names()
    assert set(RECORDING_RULES_USED) <= defined, sorted(set(RECORDING_RULES_USED) - defined)
    used = {name for q in QUERIES for name in metric_names(q.expr) if ":" in name}
    assert used <= defined, (
        f"dashboards read recording rules alerts/ does not define: {sorted(used - defined)}"
    )


def test_panels_use_the_recording_rules_where_they_exist() -> None:
    assert metrics.USE_RECORDING_RULES, "the shipped dashboards read the rules of alerts/recording_rules.yml"
    used = {name for q in QUERIES for name in metric_names(q.expr)}
    assert set(RECORDING_RULES_USED) <= used, sorted(set(RECORDING_RULES_USED) - used)
    # No panel recomputes a rule's series from the raw metrics (the raw form with any matchers).
    for derived in DERIVED:
        if derived.rule is not None:
            shape = re.compile(r"\{[^{}]*\}".join(re.escape(part) for part in derived.raw.split("{SEL}")))
            raw = [q.expr for q in QUERIES if shape.search(q.expr)]
            assert not raw, f"{derived.rule} is recomputed raw in {raw}"


@pytest.mark.parametrize("query", QUERIES, ids=_qid)
def test_matchers_on_recording_rules_name_labels_the_rule_keeps(query: Query) -> None:
    for selector in selectors(query.expr):
        if ":" not in selector.name:
            continue
        level = selector.name.split(":", 1)[0]
        wrong = {m.label for m in selector.matchers} - LEVEL_LABELS[level]
        assert not wrong, f"{selector.name} has no labels {sorted(wrong)}: {query.expr}"


def test_external_metrics_agree_with_alerts() -> None:
    assert set(EXTERNAL_METRICS) == set(external_metrics()), (
        "dashboards/metrics.py EXTERNAL_METRICS and alerts/external/metrics.yaml must name the same metrics"
    )


@pytest.mark.parametrize("query", QUERIES, ids=_qid)
def test_matchers_on_external_metrics_name_their_declared_labels(query: Query) -> None:
    declared = external_metrics()
    for selector in selectors(query.expr):
        if selector.name in declared:
            wrong = {m.label for m in selector.matchers} - declared[selector.name] - TARGET_LABELS
            assert not wrong, f"{selector.name} has no labels {sorted(wrong)}: {query.expr}"


def test_raw_mode_still_builds_consistent_dashboards(monkeypatch: pytest.MonkeyPatch) -> None:
    """With USE_RECORDING_RULES off the panels compute everything raw and $tick_bytes comes back."""
    monkeypatch.setattr(metrics, "USE_RECORDING_RULES", False)
    boards = as_dicts()
    for uid, board in boards.items():
        defined = {v["name"] for v in board["templating"]["list"]}
        for q in dashboard_queries(uid, board):
            assert not any(":" in name for name in metric_names(q.expr)), q.expr
            assert variables(q.expr) <= defined | {"__rate_interval"}, q.expr
    assert "tick_bytes" in {v["name"] for v in boards["ibpool-node"]["templating"]["list"]}
