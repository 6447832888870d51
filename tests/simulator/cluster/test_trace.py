"""Trace replay: jobs derived from the per-pool minute series reproduce its demand."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.cluster.errors import TraceError
from simulator.cluster.model import ClusterModel
from simulator.cluster.trace import TraceWorkload, job_size, map_pools, read_trace, spec_for_trace, trace_jobs
from tests.helpers import TRACE

HOURS = 24
# Tolerance: each pool's mean demand (running + pending GPUs) over the replay is within 10% of the trace's,
# or within 4 GPUs for nearly idle pools; the cluster-wide mean within 3%.
REL, ABS = 0.10, 4.0


def test_replay_reproduces_each_pools_demand() -> None:
    workload = TraceWorkload(TRACE, max_minutes=HOURS * 60)
    trace = workload.trace
    model = ClusterModel(spec_for_trace(trace), workload)
    replay = dict.fromkeys(trace.pools, 0.0)
    original = dict.fromkeys(trace.pools, 0.0)
    for minute in range(trace.minutes):
        view = model.scheduler_view()
        for name, series in trace.pools.items():
            replay[name] += view.pools[name].running_gpus + view.pools[name].pending_gpus
            original[name] += series.demand(minute)
            assert view.pools[name].allocated_gpus <= view.pools[name].capacity_gpus
        model.advance(60)
    for name in trace.pools:
        want, got = original[name] / trace.minutes, replay[name] / trace.minutes
        assert got == pytest.approx(want, rel=REL, abs=ABS), name
    assert sum(replay.values()) == pytest.approx(sum(original.values()), rel=0.03)


def test_derived_jobs_follow_the_running_series_exactly_at_the_start() -> None:
    trace = read_trace(TRACE, max_minutes=60)
    jobs = trace_jobs(trace)
    for name, series in trace.pools.items():
        at_zero = sum(j.gpus for j in jobs if j.pool == name and j.submit_time == 0.0)
        assert at_zero >= series.running_gpus[0]
    assert all(j.gpus in (1, 2, 4) or j.gpus % 8 == 0 for j in jobs)
    assert jobs == trace_jobs(trace)  # seeded
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)


def test_spec_for_trace_sizes_pools_in_whole_nodes() -> None:
    trace = read_trace(TRACE, max_minutes=5)
    spec = spec_for_trace(trace)
    assert len(spec.pools) == 16
    for pool in spec.pools:
        assert len(pool.nodes) * 8 >= max(trace.pools[pool.name].total_gpus)


def test_pool_mapping_by_order_or_by_name() -> None:
    trace = read_trace(TRACE, max_minutes=5)
    names = list(trace.pools)
    by_order = map_pools(trace, [f"p{i}" for i in range(16)])
    assert by_order[names[0]] == "p0"
    with pytest.raises(TraceError, match="only 2 spec pools"):
        map_pools(trace, ["a", "b"])
    assert map_pools(trace, ["a"], {names[3]: "a"}) == {names[3]: "a"}
    with pytest.raises(TraceError, match="unknown pools"):
        map_pools(trace, ["a"], {"nope": "a"})


def test_job_size_rounds_down_to_allowed_sizes() -> None:
    assert [job_size(g, 100) for g in (1, 3, 7, 8, 13, 37)] == [1, 2, 4, 8, 8, 32]
    assert job_size(64, 3.4) == 2


def test_a_malformed_trace_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match="expected columns"):
        read_trace(bad)
    with pytest.raises(TraceError):
        read_trace(tmp_path / "missing.csv")
