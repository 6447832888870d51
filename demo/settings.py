"""The demo's two timings (default and `--fast`): simulated durations, pacing and compressed policy windows.

Demo timings are compressed. A production recommender waits 2 minutes (quota) of persistent evidence, and
its rebalance planner plans every 10 minutes, never moves a node back within an hour, paces 0.5 moves per
pool-day and forecasts from a week of history; the demo shortens those so that a few simulated hours show
every step of the loop (its move budget is scaled up by the same compression). The
approval bounds and blast-radius limits (demo/approval.yaml) are not compressed.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.policies.quota import QuotaParams
from recommender.policies.rebalance import RebalanceParams

HIGH_POOL = "recsys"
LOW_POOL = "llm"
PRIORITIES = {HIGH_POOL: 1, LOW_POOL: 0}


@dataclass(frozen=True)
class Timings:
    """How long the demo runs and how its recommender is tuned (simulated seconds unless noted)."""

    name: str
    duration_seconds: float
    cycle_seconds: float  # simulated time between recommender cycles (one scrape each)
    speed: float | None  # simulated seconds per wall second; None: as fast as the machine goes
    status_every: int  # cycles between status lines
    effect_window_seconds: float  # before/after window around each applied change
    start_hour: float  # local hour of day at the start (the day pool's demand is ramping up)
    episode_at: float  # the congestion episode: all-reduce heavy jobs in both pools
    episode_work_seconds: float
    fault_at: float  # a GPU falls off the bus on a node of the low-priority pool
    quota: QuotaParams
    rebalance: RebalanceParams


def _quota(persistence: float, cooldown: float) -> QuotaParams:
    return QuotaParams(priorities=PRIORITIES, persistence_seconds=persistence, cooldown_seconds=cooldown)


DEFAULT = Timings(
    name="default",
    duration_seconds=3 * 3600.0,
    cycle_seconds=60.0,
    speed=75.0,
    status_every=10,
    effect_window_seconds=1200.0,
    start_hour=8.0,
    episode_at=300.0,
    episode_work_seconds=1200.0,
    fault_at=1800.0,
    quota=_quota(persistence=120.0, cooldown=600.0),
    rebalance=RebalanceParams(
        cycle_min=1.0, drain_min=3.0, reversal_min=10.0, moves_per_pool_day=24.0, history_min=60.0
    ),
)

FAST = Timings(
    name="fast",
    duration_seconds=60 * 60.0,
    cycle_seconds=120.0,
    speed=None,
    status_every=5,
    effect_window_seconds=900.0,
    start_hour=8.0,
    episode_at=120.0,
    episode_work_seconds=900.0,
    fault_at=1200.0,
    quota=_quota(persistence=90.0, cooldown=300.0),
    rebalance=RebalanceParams(
        cycle_min=2.0, drain_min=4.0, reversal_min=6.0, moves_per_pool_day=48.0, history_min=30.0
    ),
)
