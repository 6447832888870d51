"""Small helpers shared by the tests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from exporter.exposition import MetricSpec

FAMILY_SPEC = MetricSpec("ibpool_test_family", "gauge", "A test family.", ("name",))

Samples = dict[tuple[tuple[str, str], ...], float]


def samples_of(text: str, name: str) -> Samples:
    """Samples of metric `name` (full sample name) in an exposition, keyed by sorted label items."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out
