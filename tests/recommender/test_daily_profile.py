"""The time-of-day demand profile behind shift plans."""

from __future__ import annotations

import pytest

from recommender.policies.daily_profile import DailyProfile, ProfileParams

DAY = 1440


def feed(profile: DailyProfile, days: int, demand_at: object, *, start_day: int = 20_000) -> int:
    """Record one sample a minute for `days` days; `demand_at(day, minute_of_day)`; return the next minute."""
    assert callable(demand_at)
    base = start_day * DAY
    for d in range(days):
        for m in range(DAY):
            profile.record("p", base + d * DAY + m, demand_at(d, m))
    return base + days * DAY


def day_shift(day: int, minute: int) -> int:
    """96 GPUs wanted 08:00-20:00, 16 otherwise."""
    return 96 if 8 * 60 <= minute < 20 * 60 else 16


def test_no_forecast_before_enough_days() -> None:
    profile = DailyProfile(ProfileParams(days=7, min_days=5))
    now = feed(profile, 4, day_shift)
    assert profile.forecast("p", now + 9 * 60) is None
    assert profile.forecast("unknown", now) is None


def test_forecast_follows_the_daily_shift() -> None:
    profile = DailyProfile(ProfileParams(days=7, min_days=5, horizon_min=240))
    now = feed(profile, 6, day_shift)
    during = profile.forecast("p", now + 9 * 60)
    night = profile.forecast("p", now + 2 * 60)
    assert during is not None and night is not None
    assert during.expected_demand == 96 and during.days_seen == 6
    assert night.expected_demand == 16
    # From 05:00 the next 4 hours reach into the shift (08:00): the peak says so.
    early = profile.forecast("p", now + 5 * 60)
    assert early is not None and early.expected_peak == 96
    late = profile.forecast("p", now + 21 * 60)
    assert late is not None and late.expected_peak == 16


def test_a_pattern_seen_on_too_few_days_is_not_expected() -> None:
    profile = DailyProfile(ProfileParams(days=7, min_days=5))
    now = feed(profile, 7, lambda d, m: day_shift(d, m) if d in (1, 3, 5, 6) else 16)
    forecast = profile.forecast("p", now + 9 * 60)
    assert forecast is not None
    assert forecast.expected_demand == 16  # 4 of 7 days < 5
    assert forecast.expected_peak == 96  # but a donor would keep room for it


def test_a_dip_inside_the_slot_lowers_the_expected_level() -> None:
    profile = DailyProfile(ProfileParams(slot_min=30, days=5, min_days=5))
    now = feed(profile, 5, lambda d, m: 0 if m == 9 * 60 + 10 else day_shift(d, m))
    forecast = profile.forecast("p", now + 9 * 60 + 5)
    assert forecast is not None and forecast.expected_demand == 0


def test_old_days_are_forgotten() -> None:
    profile = DailyProfile(ProfileParams(days=2, min_days=2, horizon_min=60))
    now = feed(profile, 2, day_shift)
    now = feed(profile, 3, lambda d, m: 16, start_day=now // DAY)
    forecast = profile.forecast("p", now + 9 * 60)
    assert forecast is not None and forecast.expected_demand == 16 and forecast.expected_peak == 16
    assert len(profile._slots["p"]) <= 2 * 48 + 3


@pytest.mark.parametrize(
    "kwargs",
    [{"slot_min": 0}, {"slot_min": 7}, {"days": 0}, {"min_days": 8}, {"horizon_min": 1440}],
)
def test_bad_parameters_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ProfileParams(**kwargs)  # type: ignore[arg-type]


def test_likely_peak_is_what_most_recent_days_reached_within_the_window() -> None:
    profile = DailyProfile(ProfileParams(days=7, min_days=5, likely_days=4, likely_window_min=60))
    # 96 GPUs from 09:00 on 5 of 7 days; the other two stay at 16.
    now = feed(profile, 7, lambda d, m: day_shift(d, m - 60) if d not in (0, 4) else 16)
    before = profile.forecast("p", now + 8 * 60 + 30)
    assert before is not None and before.likely_peak == 96  # reached within the hour on 5 >= 4 days
    assert before.expected_demand == 16  # the 08:30 slot itself is quiet
    early = profile.forecast("p", now + 7 * 60 + 30)
    assert early is not None and early.likely_peak == 16  # 09:00 is more than an hour away
    three = DailyProfile(ProfileParams(days=7, min_days=5, likely_days=4))
    now = feed(three, 7, lambda d, m: day_shift(d, m - 60) if d in (1, 3, 5) else 16)
    seldom = three.forecast("p", now + 8 * 60 + 30)
    assert seldom is not None and seldom.likely_peak == 16  # seen on 3 days only
    off = DailyProfile(ProfileParams(days=7, min_days=5))
    now = feed(off, 7, day_shift)
    forecast = off.forecast("p", now + 7 * 60 + 30)
    assert forecast is not None and forecast.likely_peak == 0  # off by default


def test_likely_days_cannot_exceed_the_agreement_needed() -> None:
    with pytest.raises(ValueError, match="likely_days"):
        ProfileParams(days=7, min_days=5, likely_days=6)
