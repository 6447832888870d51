"""The trailing demand outlook the live planner and the backtest's policy read."""

from __future__ import annotations

from recommender.policies.outlook import DemandHistory


def fed(series: list[int], window: float = 1000.0, recent: float = 60.0, gap: float = 11.0) -> DemandHistory:
    return DemandHistory.from_samples(enumerate(series), window, recent, gap)


def test_a_shortfall_lasts_through_dips_shorter_than_the_gap() -> None:
    series = [0] * 100 + [24] * 50 + [0] * 5 + [24] * 45  # a 5-minute dip at minute 150
    history = fed(series)
    rate, lasted = history.shortfall(16, 8)
    assert lasted == 199 - 99  # since the last minute whose 11-minute window stayed at or below 16
    assert rate == 8 * 55 / 60  # 5 of the last 60 minutes were below the level
    broken = fed([0] * 100 + [24] * 50 + [0] * 11 + [24] * 39)  # an 11-minute gap ends the episode
    assert broken.shortfall(16, 8)[1] == 199 - 160


def test_the_rate_is_clipped_to_one_node() -> None:
    assert fed([40] * 60).shortfall(16, 8)[0] == 8.0
    assert fed([20] * 60).shortfall(16, 8)[0] == 4.0


def test_idle_span_and_tail_share_of_a_donor() -> None:
    series = [32] * 10 + [0] * 980 + [8] * 10  # 20 demand minutes: half of them above 16
    history = fed(series, window=2000.0)
    idle, tail = history.idle(16)
    assert idle == 999 - 9
    assert tail == 0.5
    assert history.idle(40) == (999.0, 0.0)  # never above: idle for all it has seen
    assert history.busy_minutes() == 20


def test_old_samples_leave_the_window() -> None:
    history = fed([32] * 10 + [0] * 990, window=500.0)
    assert history.busy_minutes() == 0
    assert history.idle(16) == (499.0, 0.0)  # idle over the whole window kept
    assert history.watched_min == 499.0


def test_a_trailing_history_cannot_see_ahead() -> None:
    assert not fed([0] * 10).needs_soon(0)
