"""Every metric a dashboard queries is defined: in the catalog, assumed external, a rule, or built in."""

from __future__ import annotations

import re

import pytest

from dashboards import metrics
from dashboards.metrics import BUILTIN_METRICS, DERIVED, EXTERNAL_METRICS, RECORDING_RULES_USED
from dashboards.promql import metric_names, parse_label_values, range_selectors, substitute, variables
from dashboards.queries import Query, all_queries
from exporter import catalog
from exporter.collectors.infiniband import MIRRORED
from foundation.exposition import MetricSpec


def catalog_names() -> set[str]:
    """Every metric name exporter/catalog.py defines (module-level specs and spec tables)."""
    names = set()
    for value in vars(catalog).values():
        items = value.values() if isinstance(value, dict) else [value]
        for item in items:
            spec = item[0] if isinstance(item, tuple) else item
            if isinstance(spec, MetricSpec):
                names.add(spec.name)
    return names


CATALOG = catalog_names()
# node_exporter's twins of the families ibpool mirrors (read where ibpool runs without its mirror)
NODE_EXPORTER = {metrics.NODE_EXPORTER_PREFIX + s.name.removeprefix("ibpool_infiniband_") for s in MIRRORED}
KNOWN = CATALOG | set(EXTERNAL_METRICS) | set(RECORDING_RULES_USED) | set(BUILTIN_METRICS) | NODE_EXPORTER


@pytest.mark.parametrize("query", all_queries(), ids=lambda q: f"{q.dashboard_uid}/{q.title}/{q.ref_id}")
def test_every_metric_is_known(query: Query) -> None:
    names = metric_names(query.expr)
    assert names, f"no metric found in {query.expr!r}"
    assert names <= KNOWN, f"unknown metrics {sorted(names - KNOWN)} in {query.expr!r}"


def test_assumed_metrics_are_not_in_the_catalog_and_are_used() -> None:
    assert not set(EXTERNAL_METRICS) & CATALOG, "drop from EXTERNAL_METRICS what the catalog now defines"
    used = set().union(*(metric_names(q.expr) for q in all_queries()))
    assert set(EXTERNAL_METRICS) <= used


def test_recording_rule_names_follow_level_metric_operation() -> None:
    for rule in RECORDING_RULES_USED:
        assert re.fullmatch(r"[a-z_]+:ibpool_[a-z_]+:[a-z0-9_]+", rule), rule


def test_recording_rules_replace_the_raw_expressions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "USE_RECORDING_RULES", False)
    for derived in DERIVED:
        raw = derived.expr('pool=~"$pool"')
        assert "{SEL}" not in raw and (derived.rule is None or derived.rule not in raw)
        assert 'pool=~"$pool"' in raw
        if derived.raw_matchers:
            assert "{" + derived.raw_matchers + ', pool=~"$pool"}' in raw
    monkeypatch.setattr(metrics, "USE_RECORDING_RULES", True)
    for derived in DERIVED:
        if derived.rule is None:
            assert derived.expr('pool=~"$pool"') == derived.raw.replace("{SEL}", '{pool=~"$pool"}')
        else:
            assert derived.expr('pool=~"$pool"') == derived.rule + '{pool=~"$pool"}'
            assert derived.expr() == derived.rule


def test_metric_names_skips_functions_labels_keywords_and_numbers() -> None:
    expr = (
        'sum by (pool) (rate(ibpool_a_total{node=~"$node", x="y{z}"}[$__rate_interval])) * 1e3 * $tick_bytes'
        " / on (node) group_left (pool) max by (node, pool) (ibpool_b_info) > bool 0.5 or vector(0)"
    )
    assert metric_names(expr) == {"ibpool_a_total", "ibpool_b_info"}
    assert metric_names("level:ibpool_x:rate5m offset 5m") == {"level:ibpool_x:rate5m"}
    assert range_selectors(expr) == ["$__rate_interval"]
    assert variables(expr) == {"node", "__rate_interval", "tick_bytes"}


def test_substitute_and_label_values() -> None:
    values = {"node": ".*", "__rate_interval": "1m", "tick_bytes": "256"}
    assert substitute('rate(a{node=~"$node"}[$__rate_interval]) * ${tick_bytes}', values) == (
        'rate(a{node=~".*"}[1m]) * 256'
    )
    with pytest.raises(KeyError):
        substitute("a * $unknown", values)
    assert parse_label_values('label_values(ibpool_gpu_up{node=~"$node"}, gpu)') == (
        'ibpool_gpu_up{node=~"$node"}',
        "gpu",
    )
    assert parse_label_values("up") is None


def test_query_promql_substitutes_everything() -> None:
    for query in all_queries():
        text = re.sub(r'"\$\d+"', '""', query.promql())  # label_replace's "$1" is no variable
        assert "$" not in text, text


def test_every_gpu_and_self_metric_has_a_panel_on_the_node_dashboard() -> None:
    gpu_and_self = {
        spec.name
        for name, spec in vars(catalog).items()
        if isinstance(spec, MetricSpec) and name.startswith(("GPU_", "COLLECTOR_"))
    } | set(catalog.PROCESS_SELF_METRICS)
    node = set().union(*(metric_names(q.expr) for q in all_queries() if q.dashboard_uid == "ibpool-node"))
    assert sorted(name for name in gpu_and_self if name not in node) == []
