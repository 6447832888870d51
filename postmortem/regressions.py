"""When a change made a pool worse: one table of metrics and tolerances, for the demo's twin and the report.

A metric is worse when it moved the wrong way by more than both its absolute and its relative tolerance
against the baseline (the same window without the change, or the window before it). Metrics are those of
an effect table: multi-node slowdown, pending GPU-minutes (or pending GPUs), job wait p95, GPU-hours
served, and the whole cluster's GPU utilization and allocation (a pool's share moves with its capacity
when nodes move, so it is shown but not judged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """How one metric counts as worse."""

    metric: str
    label: str
    higher_is_worse: bool
    relative: float
    absolute: float
    overall_only: bool = False  # a share of a pool's capacity moves with the capacity itself


RULES: tuple[Rule, ...] = (
    Rule("multinode_slowdown", "multi-node slowdown", True, 0.05, 0.02),
    Rule("slowdown", "multi-node slowdown", True, 0.05, 0.02),
    Rule("pending_gpu_minutes", "pending GPU-minutes", True, 0.10, 60.0),
    Rule("pending_gpus", "pending GPUs", True, 0.10, 4.0),
    Rule("wait_p95_minutes", "job wait p95 (min)", True, 0.10, 5.0),
    Rule("gpu_hours_served", "GPU-hours served", False, 0.05, 1.0),
    Rule("utilization", "GPU utilization", False, 0.0, 0.02, overall_only=True),
    Rule("allocation", "GPU allocation", False, 0.0, 0.02, overall_only=True),
)
OVERALL = "overall"
BY_METRIC = {rule.metric: rule for rule in RULES}


@dataclass(frozen=True)
class Regression:
    """One metric of one pool that got worse."""

    pool: str
    metric: str
    label: str
    baseline: float
    value: float

    def describe(self) -> str:
        """`llm multi-node slowdown 1.64 -> 2.45 (+50%)` (baseline -> with the change)."""
        rel = f" ({(self.value - self.baseline) / abs(self.baseline):+.0%})" if self.baseline else ""
        return f"{self.pool} {self.label} {self.baseline:.3g} -> {self.value:.3g}{rel}"


def worse(metric: str, baseline: float | None, value: float | None, pool: str = OVERALL) -> bool:
    """Whether `value` is worse than `baseline` beyond the metric's tolerances (unknown metrics: never)."""
    rule = BY_METRIC.get(metric)
    if rule is None or baseline is None or value is None or (rule.overall_only and pool != OVERALL):
        return False
    delta = value - baseline if rule.higher_is_worse else baseline - value
    return delta > rule.absolute and delta > rule.relative * abs(baseline)


def find(metrics: Mapping[str, Mapping[str, tuple[float | None, float | None]]]) -> list[Regression]:
    """Every (pool, metric) of `metrics[pool][metric] = (baseline, value)` that got worse."""
    out = []
    for pool in sorted(metrics):
        for metric, (baseline, value) in metrics[pool].items():
            if worse(metric, baseline, value, pool):
                rule = BY_METRIC[metric]
                assert baseline is not None and value is not None
                out.append(Regression(pool, metric, rule.label, float(baseline), float(value)))
    return out
