"""The rebalancing targets and the policy's verdict against them."""

from __future__ import annotations

from typing import Any

from recommender.backtest.targets import RELATIVE, checks, verdict


def _report(**policy: float) -> dict[str, Any]:
    figures = {
        "coverage_beyond_static": 0.80,
        "coverage": 0.86,
        "moves_per_pool_day": 0.5,
        "reversals_within_60min_per_30_days": 0.0,
        "worst_pool_p95_wait_ratio_vs_static": 1.0,
        "worst_pool_p99_wait_ratio_vs_static": 1.5,
    }
    figures.update(policy)
    return {"policy": figures, "reference": {"coverage_beyond_static": 0.95}}


def test_every_target_is_judged_and_a_limit_reached_exactly_is_met() -> None:
    judged = {c.name: c for c in checks(_report())}
    assert list(judged) == ["ceiling", "moves", "reversals", "p95", "p99", "coverage"]
    assert not judged["ceiling"].met  # 0.80 is 15 points under the reference plan
    assert judged["ceiling"].limit == 0.95 - 0.10
    assert judged["moves"].met and judged["p99"].met  # at the limit
    assert judged["coverage"].met


def test_each_target_can_be_missed() -> None:
    misses = {
        "moves": _report(moves_per_pool_day=0.51),
        "reversals": _report(reversals_within_60min_per_30_days=1.5),
        "p95": _report(worst_pool_p95_wait_ratio_vs_static=1.06),
        "p99": _report(worst_pool_p99_wait_ratio_vs_static=1.51),
        "coverage": _report(coverage=0.849),
    }
    for name, report in misses.items():
        missed = [c.name for c in checks(report) if not c.met]
        assert missed == ["ceiling", name]


def test_without_the_reference_plan_the_ceiling_is_not_judged() -> None:
    report = _report()
    del report["reference"]
    assert "ceiling" not in [c.name for c in checks(report)]


def test_the_protocol_verdict_leaves_out_the_busier_weeks_coverage() -> None:
    assert list(verdict(_report(coverage_beyond_static=0.90))) == list(RELATIVE)
    assert all(verdict(_report(coverage_beyond_static=0.90, coverage=0.2)).values())
