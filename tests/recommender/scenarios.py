"""Constructed traces for the backtest tests."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from recommender.backtest.trace import Trace

START = datetime(2024, 1, 1, tzinfo=UTC)


def make_trace(pools: dict[str, tuple[int, list[int], list[int]]]) -> Trace:
    """A 1-minute trace from {pool: (capacity, running per step, pending per step)}."""
    names = sorted(pools)
    return Trace(
        pools=tuple(names),
        start=START,
        step_min=1.0,
        capacity=tuple([pools[n][0]] * len(pools[n][1]) for n in names),
        running=tuple(list(pools[n][1]) for n in names),
        pending=tuple(list(pools[n][2]) for n in names),
    )


def borrower_and_donor(hours: int = 16, busy_from_h: int = 8) -> Trace:
    """`busy` (16 GPUs, full) has 16 GPUs pending from `busy_from_h` on; `idle` (32 GPUs) runs 4."""
    steps = hours * 60
    start = busy_from_h * 60
    return make_trace(
        {
            "busy": (16, [16] * steps, [0] * start + [16] * (steps - start)),
            "idle": (32, [4] * steps, [0] * steps),
        }
    )


def flickering(hours: int = 24, seed: int = 7) -> Trace:
    """`busy`'s pending flickers on and off every few minutes; `idle` could lend two nodes."""
    rng = random.Random(seed)
    steps = hours * 60
    flicker = [rng.choice((0, 0, 16)) for _ in range(steps)]
    return make_trace({"busy": (16, [16] * steps, flicker), "idle": (16, [0] * steps, [0] * steps)})


def spiky_donor(hours: int = 24, seed: int = 7) -> Trace:
    """`busy` has 16 GPUs pending throughout; the only donor, `spiky`, jumps between 0 and 24 GPUs."""
    rng = random.Random(seed)
    steps = hours * 60
    spiky = [rng.choice((0, 0, 4, 8, 24)) if (i // 20) % 3 == 0 else 0 for i in range(steps)]
    return make_trace({"busy": (16, [16] * steps, [16] * steps), "spiky": (32, spiky, [0] * steps)})


def day_and_night(days: int = 12) -> Trace:
    """`day` wants 96 of its 64 GPUs from 08:00 to 20:00 and 8 otherwise; `night` the other way round."""

    def shift(on: bool) -> tuple[int, int]:
        return (64, 32) if on else (8, 0)

    series: dict[str, tuple[int, list[int], list[int]]] = {}
    for name, busy in (("day", lambda h: 8 <= h < 20), ("night", lambda h: not 8 <= h < 20)):
        rows = [shift(busy((t % 1440) // 60)) for t in range(days * 1440)]
        series[name] = (64, [r for r, _ in rows], [q for _, q in rows])
    return make_trace(series)


def quiet_owner_bursts(days: int = 9, burst_day: int = 8) -> Trace:
    """`busy` (16 GPUs) always has 16 pending; `owner` (32 GPUs) is idle every day except a 30-minute
    burst to all 32 GPUs at noon on `burst_day`."""
    steps = days * 1440
    burst = range(burst_day * 1440 + 720, burst_day * 1440 + 750)
    owner = [32 if t in burst else 0 for t in range(steps)]
    return make_trace({"busy": (16, [16] * steps, [16] * steps), "owner": (32, owner, [0] * steps)})
