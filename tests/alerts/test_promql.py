"""The PromQL scanner finds metric names and only metric names."""

from __future__ import annotations

import pytest

from tests.alerts.promql import Matcher, PromQLScanError, Selector, metric_names, selectors
from tests.alerts.rulefiles import AlertsLayoutError, parse_duration, parse_series


def test_plain_and_matched_selectors() -> None:
    assert selectors('up{job=~"ibpool.*"} == 0') == [Selector("up", (Matcher("job", "=~", "ibpool.*"),))]
    assert selectors("a_b:c:d") == [Selector("a_b:c:d")]


def test_functions_aggregations_and_keywords_are_not_metrics() -> None:
    expr = """
      sum by (pool, node) (rate(x_total[5m]))
      / on (pool) group_left (node) max without () (y)
      and ignoring (a) z offset 10m
      unless bool_metric == bool 4
      or count_values("value", w) > inf
    """
    assert metric_names(expr) == {"x_total", "y", "z", "bool_metric", "w"}


def test_label_lists_strings_and_comments_are_skipped() -> None:
    expr = """
      label_replace(vector(256), "hca_type", "MT4129", "", "") or  # vector(0) not_a_metric
      max by (node, instance, job) (m{counter="port_xmit_wait", a!="x,y}"}) # tail comment
    """
    assert selectors(expr) == [
        Selector("m", (Matcher("counter", "=", "port_xmit_wait"), Matcher("a", "!=", "x,y}"))),
    ]


def test_numbers_durations_and_subqueries() -> None:
    expr = "max_over_time((s >= bool 4)[1d:5m]) * 1e9 + 0x1F - 4294967295 + .5 + t offset 1h30m"
    assert metric_names(expr) == {"s", "t"}


def test_escaped_quotes_inside_matchers() -> None:
    assert selectors(r'm{a="say \"hi\"", b=~`raw\d`}') == [
        Selector("m", (Matcher("a", "=", r"say \"hi\""), Matcher("b", "=~", r"raw\d")))
    ]


def test_bare_name_matcher() -> None:
    assert selectors('{__name__="up", job="x"}') == [Selector("up", (Matcher("job", "=", "x"),))]
    with pytest.raises(PromQLScanError):
        selectors('{__name__=~"ibpool_.*"}')


@pytest.mark.parametrize("expr", ['m{a="x"', "m{a x}", 'm{a="x}', "m[5m"])
def test_malformed_expressions_are_reported(expr: str) -> None:
    with pytest.raises(PromQLScanError):
        selectors(expr)


def test_durations() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("10m") == 600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1d") == 86400
    for bad in ("", "10", "m", "5m10", "1x"):
        with pytest.raises(AlertsLayoutError):
            parse_duration(bad)


def test_series_notation() -> None:
    assert parse_series('ALERTS{alertname="A", severity="warning"}') == (
        "ALERTS",
        {"alertname": "A", "severity": "warning"},
    )
    assert parse_series('{pool="x"}') == ("", {"pool": "x"})
    assert parse_series("fleet:x:default") == ("fleet:x:default", {})
