"""The forecast's skill check: the recent window weighs in where it has forecast the next day better."""

from __future__ import annotations

from recommender.policies.outlook import DemandHistory
from recommender.policies.skill import ForecastSkill

DAY = 1440


def fed(series: list[int]) -> DemandHistory:
    out = DemandHistory(7 * DAY, 60.0, 11.0, profile=False)
    for minute, demand in enumerate(series):
        out.push(minute, demand)
    return out


def test_no_weights_before_a_forecast_is_a_day_old() -> None:
    skill = ForecastSkill(60.0, DAY, 7 * DAY)
    for minute in range(DAY):
        skill.push(minute, 8)
        if skill.due(minute):
            skill.record(minute, 8.0, 8.0)
    assert skill.weights() is None
    skill.push(DAY, 8)
    assert skill.weights() is not None


def test_the_forecast_that_erred_less_weighs_more() -> None:
    skill = ForecastSkill(60.0, DAY, 7 * DAY)
    for minute in range(3 * DAY):  # demand 10 all along: the recent forecast says 10, the other 30
        skill.push(minute, 10)
        if skill.due(minute):
            skill.record(minute, 30.0, 10.0)
    weights = skill.weights()
    assert weights is not None and sum(weights) == 1.0
    at_scale, recent = weights
    assert recent > 0.99 and at_scale < 0.01


def test_a_lasting_step_up_lends_weight_to_the_recent_window() -> None:
    """Quiet for three days, then 40 GPUs for good: the last hour forecast the next day better than the
    day's mean, so a loan of days is valued above what the week window (three quiet days in it) says."""
    history = fed([0] * (3 * DAY) + [40] * (2 * DAY))
    weights = history.skill.weights()
    assert weights is not None and weights[1] > 0.5
    assert history.use(32, 8, 5 * DAY) > history.window_for(5 * DAY).use(32, 8) + 2
    assert history.use(32, 8, 60.0) == history.windows[0].use(32, 8)  # the recent window's horizon: as is


def test_hourly_swings_keep_the_day_window() -> None:
    """40 GPUs every other hour: the last hour says 0 or 40, the next day brings 20, the day's mean said
    20: the day window keeps most of the weight."""
    history = fed([40 if (t // 60) % 2 else 0 for t in range(5 * DAY)])
    weights = history.skill.weights()
    assert weights is not None and weights[0] > 0.9
    day_only = history.window_for(DAY).use(16, 8)
    assert abs(history.use(16, 8, DAY) - day_only) < 0.1 * 8
