"""The effect of a change computed from the series around it (when the source has no counterfactual).

A live system has no twin: the baseline is the window before the change, so demand that moved in the
meantime shows as effect. Regressions are flagged with the same tolerances as counterfactuals
(`postmortem.regressions`), and the report says which basis a table has.
"""

from __future__ import annotations

from postmortem.model import BEFORE_AFTER, Effect, Point, RunData
from postmortem.regressions import find


def _mean(points: list[Point], start: float, end: float, *, include_start: bool) -> float | None:
    values = [v for at, v in points if (start <= at if include_start else start < at) and at <= end]
    return sum(values) / len(values) if values else None


def measure(
    data: RunData,
    at: float,
    window_s: float,
    *,
    proposal_id: str,
    kind: str,
    policy: str,
    changes: tuple[tuple[str, str, str], ...],
    expected_effect: str,
) -> Effect:
    """Per pool: mean utilization and pending GPUs in [at - window, at) and (at, at + window]."""
    before = (at - window_s, at)
    after = (at, at + window_s)
    metrics: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for pool in sorted(set(data.utilization) | set(data.pending)):
        row: dict[str, tuple[float | None, float | None]] = {}
        for name, series in (("utilization", data.utilization), ("pending_gpus", data.pending)):
            points = series.get(pool, [])
            b = [p for p in points if p[0] < at]
            row[name] = (
                _mean(b, before[0], before[1], include_start=True),
                _mean(points, at, after[1], include_start=False),
            )
        metrics[pool] = row
    found = tuple(r.describe() for r in find(metrics))
    return Effect(
        at, proposal_id, kind, policy, changes, expected_effect, before, after, metrics, BEFORE_AFTER, found
    )
