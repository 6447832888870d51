"""The time-of-day profile: used where it forecasts better than persistence, checked as it goes."""

from __future__ import annotations

import random

from recommender.policies.outlook import DemandHistory
from recommender.policies.profile import DailyProfile

DAY = 1440


def office(days: int, minute_of_day_end: int = 0) -> list[int]:
    """56 GPUs from 09:00 to 17:00 every day, nothing otherwise."""
    total = days * DAY - (DAY - minute_of_day_end if minute_of_day_end else 0)
    return [56 if 9 * 60 <= t % DAY < 17 * 60 else 0 for t in range(total)]


def fed(series: list[int], *, profile: bool = True) -> DemandHistory:
    out = DemandHistory(7 * DAY, 60.0, 11.0, profile=profile)
    for minute, demand in enumerate(series):
        out.push(minute, demand)
    return out


def test_a_stable_daily_pattern_is_foreseen_and_recalled_in_time() -> None:
    history = fed(office(5, minute_of_day_end=3 * 60))  # now: 02:59 on day 5
    assert history.profile is not None and history.profile.better(0, 24)
    idle, missed = history.idle(48)  # lending a node leaves 48: needed again at 09:00
    assert idle == 9 * 60 - (3 * 60 - 1) and missed == 0
    assert history.idle(56)[0] > 0 and history.idle(56) != history.idle(48)
    # a day's loan is worth the office hours' share of a node above 48
    assert history.use(48, 8, DAY) == 8 * 8 * 60 / DAY
    before = fed(office(5, minute_of_day_end=8 * 60 + 50))  # now 08:49: a recall lands at 09:00
    assert before.demand_soon() == 56
    assert fed(office(5, minute_of_day_end=8 * 60 + 30)).demand_soon() == 0  # too early to recall


def test_persistence_is_kept_where_the_profile_does_not_forecast_better() -> None:
    """Random hourly levels: no stable daily pattern, so the calibration check keeps persistence and the
    outlook answers exactly as one without a profile."""
    rng = random.Random(11)
    series = [lvl for _ in range(6 * 24) for lvl in [rng.choice((0, 8, 24, 40))] * 60]
    with_profile, without = fed(series), fed(series, profile=False)
    assert with_profile.profile is not None and not with_profile.profile.better(0, 24)
    for level in (0, 8, 16, 32):
        assert with_profile.idle(level) == without.idle(level)
        for horizon in (60.0, 600.0, float(DAY)):
            assert with_profile.use(level, 8, horizon) == without.use(level, 8, horizon)
    assert with_profile.demand_soon() == 0


def test_the_profile_is_not_used_before_a_whole_day_was_checked() -> None:
    history = fed(office(1, minute_of_day_end=20 * 60))  # less than a day of checks possible
    assert history.idle(48)[1] is None
    assert history.profile is not None and not history.profile.better(0, 1)


def test_misses_count_the_rises_the_profile_did_not_see_coming() -> None:
    profile = DailyProfile(60.0, 7 * DAY)
    series = office(4)
    series += [56 if 9 * 60 <= t < 17 * 60 or 20 * 60 <= t < 21 * 60 else 0 for t in range(DAY)]
    for minute, demand in enumerate(series):
        profile.push(minute, demand)
    profile.push(len(series), 0)  # finishes the last slot
    assert profile.misses(48) == 1  # the 20:00 burst on day 5, above a forecast of 0
    assert profile.misses(60) == 0
