"""The trailing demand outlook the live planner and the backtest's policy read."""

from __future__ import annotations

from recommender.policies.outlook import DemandHistory

DAY = 1440


def fed(
    series: list[int],
    window: float = 7 * DAY,
    recent: float = 60.0,
    gap: float = 11.0,
    *,
    profile: bool = True,
) -> DemandHistory:
    out = DemandHistory(window, recent, gap, profile=profile)
    for minute, demand in enumerate(series):
        out.push(minute, demand)
    return out


def test_use_is_forecast_at_the_loans_own_scale() -> None:
    """A pool that queued a node's worth all day but not in the last hour: an hour's loan is worth
    nothing, a day's loan nearly a node."""
    history = fed([24] * (DAY - 60) + [16] * 60, profile=False)
    assert history.use(16, 8, 60) == 0.0  # the last hour: never above 16
    assert history.use(16, 8, DAY) == 8 * (DAY - 60) / DAY  # the last day
    assert history.use(16, 8, 1000) == history.use(16, 8, DAY)  # closest window on a log scale
    assert history.use(16, 8, 100) == 0.0


def test_use_is_clipped_to_one_node() -> None:
    assert fed([40] * 60).use(16, 8, 60) == 8.0
    assert fed([20] * 60).use(16, 8, 60) == 4.0
    assert fed([20] * 30 + [0] * 30).use(16, 8, 60) == 2.0


def test_idle_span_is_persistence_without_a_calibrated_profile() -> None:
    series = [32] * 10 + [0] * 980 + [8] * 10
    history = fed(series, window=2000.0)
    assert history.idle(16) == (999.0 - 9, None)  # not foreseen: persistence since the last minute above
    assert history.idle(40) == (999.0, None)  # never above: idle for all it has seen
    assert history.busy_minutes() == 20


def test_rises_count_each_climb_above_a_level_once_per_drain() -> None:
    up = [0] * 100 + [24] * 50
    dip = [0] * 5  # shorter than the 11-minute gap: the same rise
    gap = [0] * 20  # longer: a new rise
    history = fed(up + dip + [24] * 50 + gap + [24] * 50 + [0] * 100, profile=False)
    rises, busy, held = history.rises(16, 1000)
    assert rises == 2 and busy == 150 and held == 375
    assert history.rises(30, 1000)[0] == 0  # never above 30
    assert history.rises(16, 60)[0] == 0  # the last hour saw none


def test_old_samples_and_rises_leave_the_window() -> None:
    history = fed([32] * 10 + [0] * 990, window=500.0)
    assert history.busy_minutes() == 0
    assert history.rises(16, 500)[0] == 0
    assert history.idle(16) == (499.0, None)  # idle over the whole window kept
    assert history.watched_min == 499.0


def test_a_trailing_history_without_a_profile_cannot_see_ahead() -> None:
    assert fed([0] * 10).demand_soon() == 0
