"""The demo's two timings (default and `--fast`): simulated durations, cycles and compressed policy windows.

The default run is one simulated day from 06:00 with a recommender cycle, a scrape and one sample of the
exporters' series every 10 simulated minutes; `--fast` is its first six hours. Both run unpaced. The
recommender's windows are compressed so that one day shows every step of the loop; the approval bounds
and blast-radius limits (demo/approval.yaml) are not. What is compressed, and why: docs/demo.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    cycle_seconds: float  # simulated time between recommender cycles (one scrape and one series sample)
    sample_seconds: float  # ground-truth samples of both twins (loop and static), for the comparison
    status_every: int  # cycles between status lines
    effect_window_seconds: float  # how long each change's counterfactual is followed
    start_hour: float  # UTC hour of day at the start (the day pool's demand is ramping up)
    episode_at: float  # the congestion episode: all-reduce heavy jobs in both pools
    episode_work_seconds: float
    fault_at: float  # a GPU falls off the bus on a node of the low-priority pool
    quota: QuotaParams
    rebalance: RebalanceParams


def _quota(persistence: float, cooldown: float) -> QuotaParams:
    return QuotaParams(priorities=PRIORITIES, persistence_seconds=persistence, cooldown_seconds=cooldown)


DEFAULT = Timings(
    name="default",
    duration_seconds=24 * 3600.0,
    cycle_seconds=600.0,
    sample_seconds=60.0,
    status_every=6,
    effect_window_seconds=3600.0,
    start_hour=6.0,
    episode_at=1800.0,
    episode_work_seconds=3600.0,
    fault_at=9 * 3600.0,
    quota=_quota(persistence=600.0, cooldown=1200.0),
    rebalance=RebalanceParams(
        cycle_min=10.0,
        drain_min=10.0,
        reclaim_min=10.0,  # the simulated Slurm side drains only: a reclaim would not be faster here
        reversal_min=60.0,
        moves_per_pool_day=8.0,
        history_min=120.0,
    ),
)

# The first six hours of the same day, the fault three hours in.
FAST = replace(DEFAULT, name="fast", duration_seconds=6 * 3600.0, fault_at=3 * 3600.0)
