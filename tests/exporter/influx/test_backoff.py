"""Backoff: exponential growth, the cap, jitter, Retry-After, reset."""

from __future__ import annotations

import pytest

from exporter.influx.backoff import Backoff


def test_delays_grow_exponentially_up_to_the_cap() -> None:
    backoff = Backoff(0.5, base=2.0, max_delay=5.0, jitter=0.2, rng=lambda: 0.0)
    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.attempt == 6


def test_jitter_takes_off_at_most_its_share() -> None:
    backoff = Backoff(1.0, base=3.0, max_delay=100.0, jitter=0.25, rng=lambda: 1.0)
    assert [backoff.next_delay() for _ in range(3)] == [0.75, 2.25, 6.75]


def test_retry_after_raises_the_delay_but_not_past_the_cap() -> None:
    backoff = Backoff(1.0, max_delay=30.0, jitter=0.0)
    assert backoff.next_delay(retry_after=7.0) == 7.0
    assert backoff.next_delay(retry_after=600.0) == 30.0
    assert backoff.next_delay(retry_after=0.0) == 4.0


def test_reset_starts_over() -> None:
    backoff = Backoff(1.0, jitter=0.0)
    backoff.next_delay()
    backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 1.0


def test_many_attempts_stay_finite() -> None:
    backoff = Backoff(1.0, base=10.0, max_delay=60.0, jitter=0.0)
    backoff.attempt = 10_000
    assert backoff.next_delay() == 60.0


@pytest.mark.parametrize(
    ("initial", "base", "max_delay", "jitter"),
    [(0.0, 2.0, 1.0, 0.0), (1.0, 0.5, 2.0, 0.0), (2.0, 2.0, 1.0, 0.0), (1.0, 2.0, 2.0, 1.0)],
)
def test_invalid_parameters_are_refused(initial: float, base: float, max_delay: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="need"):
        Backoff(initial, base, max_delay, jitter)
