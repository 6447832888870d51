"""The seeded generator: reproducible, day/night shaped, sized as asked."""

from __future__ import annotations

import itertools

from simulator.cluster.workload import GeneratedWorkload, PoolWorkload, day_night_workload


def test_generator_is_seeded() -> None:
    first = list(day_night_workload("day", "night", 64, 64, seed=2, horizon=86_400))
    assert first == list(day_night_workload("day", "night", 64, 64, seed=2, horizon=86_400))
    assert first != list(day_night_workload("day", "night", 64, 64, seed=3, horizon=86_400))
    assert [r.submit_time for r in first] == sorted(r.submit_time for r in first)


def test_day_pool_arrives_by_day_and_night_pool_by_night() -> None:
    jobs = list(day_night_workload("day", "night", 512, 512, seed=1, horizon=7 * 86_400))

    def by_day(pool: str) -> float:
        hours = [(r.submit_time / 3600) % 24 for r in jobs if r.pool == pool]
        return sum(1 for h in hours if 8 <= h < 20) / len(hours)

    assert by_day("day") > 0.7
    assert by_day("night") < 0.3


def test_sizes_come_from_the_table() -> None:
    pool = PoolWorkload("p", jobs_per_hour=60, sizes=((1, 1.0), (16, 1.0)))
    jobs = list(itertools.islice(GeneratedWorkload([pool], seed=1), 200))
    assert {r.gpus for r in jobs} == {1, 16}
    assert all(r.work_seconds >= 60 for r in jobs)
