"""The information benchmark's expected idle spans, against brute force on small constructed days."""

from __future__ import annotations

from itertools import permutations

import pytest

from benchmarks.backtest_information import DayDrawOutlook, Knowledge, expected_following
from recommender.policies.outlook import DemandHistory

DAY = 10


def _brute_without_replacement(firsts: list[int], quiet: int) -> float:
    """Mean over every order of the days of the minutes until the first rise."""
    days: list[int | None] = [*firsts, *([None] * quiet)]
    totals = []
    for order in permutations(days):
        t = 0
        for first in order:
            if first is not None:
                t += first
                break
            t += DAY
        totals.append(t)
    return sum(totals) / len(totals)


@pytest.mark.parametrize(("firsts", "quiet"), [([3], 0), ([3], 2), ([2, 7], 1), ([1, 5, 9], 3), ([], 3)])
def test_without_replacement_matches_every_order(firsts: list[int], quiet: int) -> None:
    assert expected_following(firsts, quiet, DAY, replace=False) == pytest.approx(
        _brute_without_replacement(firsts, quiet)
    )


def test_with_replacement_is_the_geometric_sum() -> None:
    firsts, quiet = [4, 6], 2  # half the days quiet: E = sum_k (1/2)^(k+1) (k DAY + 5)
    series = sum(0.5 ** (k + 1) * (k * DAY + 5) for k in range(200))
    assert expected_following(firsts, quiet, DAY, replace=True) == pytest.approx(series)
    assert expected_following([], 3, DAY, replace=True) is None  # never rises


def _outlook(demand: list[int], knowledge: Knowledge, now: int) -> DayDrawOutlook:
    history = DemandHistory.from_samples(
        enumerate(demand[: now + 1]), window_min=7 * DAY, recent_min=2, gap_min=1
    )
    out = DayDrawOutlook(demand, history, knowledge, per_day=DAY, cap=7 * DAY, drain=1)
    out.now = now
    return out


def test_a_rise_later_today_is_foreseen_only_when_today_is_known() -> None:
    demand = [0] * DAY + [0, 0, 0, 0, 0, 0, 5, 0, 0, 0] + [0] * DAY
    known = _outlook(demand, Knowledge("k", "known", "remaining"), now=12)
    assert known.expected_idle(0) == (4.0, True)
    assert known.idle(0) == (4.0, 0)
    past = _outlook(demand, Knowledge("p", "past", "history"), now=12)
    span, foreseen = past.expected_idle(0)
    assert not foreseen and span == 7 * DAY  # the one past day was quiet: no rise expected (the cap)


def test_the_days_to_come_decide_the_span_when_today_stays_quiet() -> None:
    # day 0 quiet, today (day 1) quiet, then one day rising at minute 3 and one quiet day, order unknown
    demand = [0] * DAY + [0] * DAY + [0, 0, 0, 9, 0, 0, 0, 0, 0, 0] + [0] * DAY
    out = _outlook(demand, Knowledge("k", "known", "remaining"), now=DAY + 4)
    span, foreseen = out.expected_idle(0)
    assert not foreseen
    assert span == pytest.approx((DAY - 4) + DAY * 1 / 2 + 3)  # rest of today, then Q/(N+1) days, then f
