"""dashboards/scope.py: every selector gets the cluster (and, for raw metrics, job) matcher, nothing else."""

from __future__ import annotations

import pytest

from dashboards.scope import scoped

C, J = 'cluster=~"$cluster"', 'job=~"$job"'


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("up == 0", f"up{{{C}, {J}}} == 0"),
        (
            'sum by (pool) (ibpool_pool_capacity_gpus{pool=~"$pool"})',
            f'sum by (pool) (ibpool_pool_capacity_gpus{{pool=~"$pool", {C}, {J}}})',
        ),
        ('count(ALERTS{alertstate="firing"})', f'count(ALERTS{{alertstate="firing", {C}}})'),
        ("pool:ibpool_pool_idle_gpus:sum", f"pool:ibpool_pool_idle_gpus:sum{{{C}}}"),
        (
            "rate(m_total[$__rate_interval]) * $tick_bytes / on (node, device) group_left () r",
            f"rate(m_total{{{C}, {J}}}[$__rate_interval]) * $tick_bytes"
            f" / on (node, device) group_left () r{{{C}, {J}}}",
        ),
        ("sum(x) by (pool) offset 5m", f"sum(x{{{C}, {J}}}) by (pool) offset 5m"),
        (
            'label_replace(m{a="b"}, "node", "$1", "desc", "([^ ]+) .+")',
            f'label_replace(m{{a="b", {C}, {J}}}, "node", "$1", "desc", "([^ ]+) .+")',
        ),
        ("time() - max(t) > 1e9", f"time() - max(t{{{C}, {J}}}) > 1e9"),
        ('m{cluster="a"}', f'm{{cluster="a", {J}}}'),
        ("topk(10, m) and bool n", f"topk(10, m{{{C}, {J}}}) and bool n{{{C}, {J}}}"),
    ],
)
def test_selectors_are_scoped(expr: str, expected: str) -> None:
    assert scoped(expr) == expected


def test_explicit_matchers_replace_the_default() -> None:
    assert scoped("up", ()) == "up"
    assert scoped("up", (C,)) == f"up{{{C}}}"
