"""The text renderer against prometheus_client's own parser."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from foundation.exposition import MetricFamily, MetricSpec, format_value, render, render_labels

GAUGE = MetricSpec("ibpool_test_ratio", "gauge", "A test gauge.", ("device", "port"))
COUNTER = MetricSpec("ibpool_test_events_total", "counter", 'Help with \\ and "quotes".', ("name",))
INFO = MetricSpec("ibpool_test_info", "info", "Static facts.", ("version",))


def test_rendered_text_parses_back_to_the_same_samples() -> None:
    gauge, counter, info = MetricFamily(GAUGE), MetricFamily(COUNTER), MetricFamily(INFO)
    gauge.add(("mlx5_0", "1"), 0.25)
    gauge.add(("mlx5_1", "1"), 3)
    counter.add(('we"ird\\na\nme',), 2**40)
    info.add_info(("1.0",))
    families = {f.name: f for f in text_string_to_metric_families(render([gauge, counter, info]))}
    ratio = {tuple(s.labels.values()): s.value for s in families["ibpool_test_ratio"].samples}
    assert ratio == {("mlx5_0", "1"): 0.25, ("mlx5_1", "1"): 3.0}
    (event,) = families["ibpool_test_events"].samples
    assert event.labels == {"name": 'we"ird\\na\nme'} and event.value == 2**40
    assert families["ibpool_test_info"].samples[0].value == 1


def test_families_without_samples_are_left_out_and_same_names_merge() -> None:
    a, b, empty = MetricFamily(GAUGE), MetricFamily(GAUGE), MetricFamily(COUNTER)
    a.add(("d", "1"), 1)
    b.add(("d", "2"), 2)
    text = render([a, empty, b])
    assert text.count("# TYPE ibpool_test_ratio gauge") == 1
    assert "ibpool_test_events_total" not in text
    assert len([line for line in text.splitlines() if not line.startswith("#")]) == 2


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (12, "12"),
        (2.0, "2"),
        (0.5, "0.5"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (1e20, "1e+20"),
    ],
)
def test_values_are_written_as_prometheus_expects(value: float, text: str) -> None:
    assert format_value(value) == text


def test_label_rendering_is_memoised_and_ordered() -> None:
    assert render_labels(("a", "b"), ("1", "2")) == '{a="1",b="2"}'
    assert render_labels((), ()) == ""


def test_spec_rejects_badly_named_counters_and_info() -> None:
    with pytest.raises(ValueError, match="_total"):
        MetricSpec("ibpool_bad", "counter", "x")
    with pytest.raises(ValueError, match="_info"):
        MetricSpec("ibpool_bad", "info", "x")
