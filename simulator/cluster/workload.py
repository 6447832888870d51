"""Jobs to submit: the request format and a seeded generator with day/night patterns.

A workload is any iterable of `JobRequest` in non-decreasing `submit_time`; the model pulls from it as its
clock passes each request's time. `GeneratedWorkload` draws arrivals per pool from a Poisson process whose
rate follows a 24-hour cosine (`peak_hour`, `amplitude`), sizes from a weighted table and durations from a
log-normal distribution; `day_night_workload` is a preset with a day pool and a night pool.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class JobRequest:
    """One job as submitted. `work_seconds` is its run time on an uncontended fabric.

    A distributed job (more than one node) does one ring all-reduce of `allreduce_bytes` per iteration after
    `compute_seconds` of compute; a job on one node communicates over NVLink only.
    """

    pool: str
    submit_time: float
    gpus: int
    work_seconds: float
    compute_seconds: float = 0.5
    allreduce_bytes: float = 2e9
    memory_fraction: float = 0.7
    gpu_intensity: float = 0.9  # GPU utilization while computing
    name: str = ""


@dataclass(frozen=True)
class PoolWorkload:
    """How one pool's jobs arrive and what they look like."""

    pool: str
    jobs_per_hour: float
    sizes: tuple[tuple[int, float], ...] = ((8, 1.0),)  # (GPUs, weight)
    median_minutes: float = 60.0
    sigma: float = 0.8  # log-normal shape of durations
    peak_hour: float = 14.0
    amplitude: float = 0.0  # 0: flat; 1: no arrivals at the trough
    compute_seconds: float = 0.5
    allreduce_bytes: float = 2e9
    memory_fraction: float = 0.7


class GeneratedWorkload:
    """A seeded job stream from `PoolWorkload`s in submit order, `horizon` seconds long (None: endless)."""

    def __init__(
        self,
        pools: Sequence[PoolWorkload],
        seed: int = 1,
        start_hour: float = 0.0,
        horizon: float | None = None,
    ) -> None:
        self.pools = tuple(pools)
        self.seed, self.start_hour, self.horizon = seed, start_hour, horizon

    def __iter__(self) -> Iterator[JobRequest]:
        streams = [self._stream(i, p) for i, p in enumerate(self.pools)]
        merged = heapq.merge(*(_keyed(i, s) for i, s in enumerate(streams)))
        for _, _, request in merged:
            if self.horizon is not None and request.submit_time > self.horizon:
                return
            yield request

    def rate_at(self, pool: PoolWorkload, t: float) -> float:
        """Arrivals per second of `pool` at model time `t`."""
        hour = (self.start_hour + t / 3600.0) % 24.0
        shape = 1.0 + pool.amplitude * math.cos(2 * math.pi * (hour - pool.peak_hour) / 24.0)
        return pool.jobs_per_hour / 3600.0 * max(0.0, shape)

    def _stream(self, index: int, pool: PoolWorkload) -> Iterator[JobRequest]:
        rng = random.Random(f"{self.seed}/{index}/{pool.pool}")
        peak = pool.jobs_per_hour / 3600.0 * (1.0 + abs(pool.amplitude))
        if peak <= 0:
            return
        sizes = [s for s, _ in pool.sizes]
        weights = [w for _, w in pool.sizes]
        t, count = 0.0, 0
        while True:
            t += rng.expovariate(peak)  # thinning of a Poisson process at the peak rate
            if self.horizon is not None and t > self.horizon:
                return
            accept = rng.random() * peak <= self.rate_at(pool, t)
            gpus = rng.choices(sizes, weights)[0]
            minutes = pool.median_minutes * math.exp(rng.gauss(0.0, pool.sigma))
            jitter = rng.uniform(0.8, 1.2)
            if not accept:
                continue
            count += 1
            yield JobRequest(
                pool=pool.pool,
                submit_time=t,
                gpus=gpus,
                work_seconds=max(60.0, minutes * 60.0),
                compute_seconds=pool.compute_seconds * jitter,
                allreduce_bytes=pool.allreduce_bytes * jitter,
                memory_fraction=min(0.95, pool.memory_fraction * jitter),
                gpu_intensity=min(0.99, 0.85 + 0.1 * rng.random()),
                name=f"{pool.pool}-{count}",
            )


def _keyed(index: int, stream: Iterator[JobRequest]) -> Iterator[tuple[float, int, JobRequest]]:
    for request in stream:
        yield request.submit_time, index, request


# Recommender training by day (small, short, chatty jobs), LLM pretraining by night (large, long); the
# pools and arrival rates are filled in by `at_load`.
DAY_SHAPE = PoolWorkload(
    pool="",
    jobs_per_hour=0.0,
    sizes=((1, 0.2), (4, 0.2), (8, 0.3), (16, 0.2), (32, 0.1)),
    median_minutes=40.0,
    peak_hour=14.0,
    amplitude=0.8,
    compute_seconds=0.15,
    allreduce_bytes=1.5e9,
    memory_fraction=0.6,
)
NIGHT_SHAPE = PoolWorkload(
    pool="",
    jobs_per_hour=0.0,
    sizes=((16, 0.3), (32, 0.4), (64, 0.3)),
    median_minutes=150.0,
    peak_hour=2.0,
    amplitude=0.8,
    compute_seconds=0.8,
    allreduce_bytes=8e9,
    memory_fraction=0.85,
)


def at_load(shape: PoolWorkload, pool: str, capacity_gpus: int, load: float) -> PoolWorkload:
    """`shape` for `pool`, arriving so that its mean offered GPU demand is `load` times `capacity_gpus`."""
    mean_gpus = sum(s * w for s, w in shape.sizes) / sum(w for _, w in shape.sizes)
    mean_minutes = shape.median_minutes * math.exp(shape.sigma**2 / 2)
    rate = load * capacity_gpus / (mean_gpus * mean_minutes / 60.0)
    return replace(shape, pool=pool, jobs_per_hour=rate)


def day_night_workload(
    day_pool: str,
    night_pool: str,
    day_gpus: int,
    night_gpus: int,
    *,
    seed: int = 1,
    load: float = 0.9,
    start_hour: float = 0.0,
    horizon: float | None = None,
) -> GeneratedWorkload:
    """Recommender training by day (small, short, chatty jobs) and LLM pretraining by night (large, long).

    `load` scales arrivals so that the mean offered GPU demand is about `load` times each pool's capacity.
    """
    pools = [at_load(DAY_SHAPE, day_pool, day_gpus, load), at_load(NIGHT_SHAPE, night_pool, night_gpus, load)]
    return GeneratedWorkload(pools, seed=seed, start_hour=start_hour, horizon=horizon)
