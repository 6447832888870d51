"""Replay a per-pool minute trace: `time,pool,total_gpus,running_gpus,pending_gpus,running_jobs,pending_jobs`.

The trace has counts, not jobs, so each pool gets seeded jobs that reproduce its demand: run times from
`running_gpus`, submit times from `pending_gpus` (first come first served; never after the minute a job
started in the trace), an all-reduce for jobs of 16 GPUs or more (how: docs/simulator.md). Trace pools
map onto spec pools by an explicit mapping or by order; `spec_for_trace` builds a spec with one pool per
trace pool, sized by its largest `total_gpus` (in whole nodes).
"""

from __future__ import annotations

import bisect
import csv
import gzip
import io
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from simulator.cluster.errors import TraceError
from simulator.cluster.spec import ClusterSpec, FabricSpec, PoolSpec, node_names, validate
from simulator.cluster.workload import JobRequest

COLUMNS = ("time", "pool", "total_gpus", "running_gpus", "pending_gpus", "running_jobs", "pending_jobs")


@dataclass(frozen=True)
class PoolSeries:
    """One pool's minute series."""

    pool: str
    total_gpus: tuple[int, ...]
    running_gpus: tuple[int, ...]
    pending_gpus: tuple[int, ...]
    running_jobs: tuple[int, ...]
    pending_jobs: tuple[int, ...]

    def demand(self, minute: int) -> int:
        """Running plus pending GPUs at `minute`."""
        return self.running_gpus[minute] + self.pending_gpus[minute]


@dataclass(frozen=True)
class Trace:
    """A per-pool minute series, pools in first-seen order."""

    start: str
    minutes: int
    pools: Mapping[str, PoolSeries]


def read_trace(path: str | Path, max_minutes: int | None = None) -> Trace:
    """Read a trace (`.csv` or `.csv.gz`); rows must come in time order, every pool every minute."""
    path = Path(path)
    columns: dict[str, list[list[int]]] = {}
    times: list[str] = []
    try:
        text = _read_text(path)
    except OSError as exc:
        raise TraceError(f"{path}: {exc}") from exc
    with io.StringIO(text) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header[: len(COLUMNS)]) != COLUMNS:
            raise TraceError(f"{path}: expected columns {','.join(COLUMNS)}")
        for line, row in enumerate(reader, start=2):
            if len(row) < len(COLUMNS):
                raise TraceError(f"{path}:{line}: {len(row)} fields")
            if not times or row[0] != times[-1]:
                if max_minutes is not None and len(times) >= max_minutes:
                    break
                times.append(row[0])
            try:
                values = [int(float(v)) for v in row[2:7]]
            except ValueError:
                raise TraceError(f"{path}:{line}: not a number in {row[2:7]}") from None
            series = columns.setdefault(row[1], [[] for _ in range(5)])
            for target, value in zip(series, values, strict=True):
                target.append(value)
    if not times:
        raise TraceError(f"{path}: no rows")
    pools = {}
    for name, (total, running, pending, rjobs, pjobs) in columns.items():
        if len(total) != len(times):
            raise TraceError(f"{path}: pool {name} has {len(total)} rows for {len(times)} minutes")
        pools[name] = PoolSeries(
            name, tuple(total), tuple(running), tuple(pending), tuple(rjobs), tuple(pjobs)
        )
    return Trace(times[0], len(times), pools)


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text(encoding="utf-8")


def map_pools(
    trace: Trace, spec_pools: Sequence[str], mapping: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Trace pool -> spec pool, from `mapping` or by order (the first trace pool to the first spec pool)."""
    if mapping is None:
        if len(spec_pools) < len(trace.pools):
            raise TraceError(
                f"{len(trace.pools)} trace pools, only {len(spec_pools)} spec pools to map by order"
            )
        return dict(zip(trace.pools, spec_pools, strict=False))
    unknown = [p for p in mapping if p not in trace.pools] + [
        p for p in mapping.values() if p not in spec_pools
    ]
    if unknown:
        raise TraceError(f"pool mapping names unknown pools: {', '.join(unknown)}")
    return dict(mapping)


def spec_for_trace(
    trace: Trace,
    gpus_per_node: int = 8,
    seed: int = 1,
    tick_seconds: float = 60.0,
    fabric: FabricSpec | None = None,
) -> ClusterSpec:
    """A spec with one pool per trace pool (same names), each with enough nodes for its largest total."""
    sizes = {name: -(-max(s.total_gpus) // gpus_per_node) for name, s in trace.pools.items()}
    names = node_names(sum(sizes.values()))
    pools, start = [], 0
    for name, count in sizes.items():
        pools.append(PoolSpec(name, names[start : start + count]))
        start += count
    return validate(
        ClusterSpec(
            nodes=names,
            pools=tuple(pools),
            fabric=fabric or FabricSpec(),
            gpus_per_node=gpus_per_node,
            seed=seed,
            tick_seconds=tick_seconds,
        )
    )


def job_size(gap: int, typical: float) -> int:
    """A job size no larger than `gap`: near `typical`, rounded down to 1, 2, 4 or a multiple of 8."""
    want = max(1, min(gap, round(typical)))
    if want >= 8:
        return want - want % 8
    return 1 << (want.bit_length() - 1)


def trace_jobs(trace: Trace, pool_map: Mapping[str, str] | None = None, seed: int = 1) -> list[JobRequest]:
    """Jobs that reproduce the trace's per-pool demand (how: docs/simulator.md), in submit order."""
    mapping = pool_map if pool_map is not None else {p: p for p in trace.pools}
    jobs: list[tuple[float, int, int, JobRequest]] = []
    for order, (name, series) in enumerate(trace.pools.items()):
        if name not in mapping:
            continue
        rng = random.Random(f"{seed}/{name}")
        for k, request in enumerate(_pool_jobs(series, mapping[name], trace.minutes, rng)):
            jobs.append((request.submit_time, order, k, request))
    jobs.sort(key=lambda item: item[:3])
    return [item[3] for item in jobs]


def _pool_jobs(series: PoolSeries, pool: str, minutes: int, rng: random.Random) -> list[JobRequest]:
    open_jobs: dict[int, tuple[int, int]] = {}  # job -> (size, start minute)
    starts: list[tuple[int, int, int]] = []  # (job, size, start minute) in start order
    ends: dict[int, int] = {}
    virtual, started, arrivals = 0, 0, []
    for t in range(minutes):
        target = series.running_gpus[t]
        while virtual > target:
            fitting = sorted(j for j, (size, _) in open_jobs.items() if size <= virtual - target)
            if not fitting:
                break
            job = rng.choice(fitting)
            virtual -= open_jobs.pop(job)[0]
            ends[job] = t
        typical = series.running_gpus[t] / series.running_jobs[t] if series.running_jobs[t] else 8
        while virtual < target:
            size = job_size(target - virtual, typical)
            job = len(starts)
            starts.append((job, size, t))
            open_jobs[job] = (size, t)
            virtual += size
            started += size
        arrivals.append(started + series.pending_gpus[t])
    cumulative: list[int] = []
    for value in arrivals:
        cumulative.append(max(value, cumulative[-1]) if cumulative else value)
    out, position = [], 0
    for job, size, start in starts:
        arrive = min(start, bisect.bisect_right(cumulative, position))
        position += size
        run = max(1, ends.get(job, minutes + 1) - start)
        multi = size > 8
        out.append(
            JobRequest(
                pool=pool,
                submit_time=arrive * 60.0,
                gpus=size,
                work_seconds=run * 60.0,
                compute_seconds=rng.uniform(0.3, 1.0) if multi else 0.5,
                allreduce_bytes=rng.uniform(1e9, 6e9) if multi else 0.0,
                memory_fraction=rng.uniform(0.4, 0.9),
                gpu_intensity=rng.uniform(0.8, 0.98),
                name=f"{pool}-t{job + 1}",
            )
        )
    return out


class TraceWorkload:
    """An iterable workload from a trace file (jobs derived once, on construction)."""

    def __init__(
        self,
        path: str | Path,
        pool_map: Mapping[str, str] | None = None,
        seed: int = 1,
        max_minutes: int | None = None,
    ) -> None:
        self.trace = read_trace(path, max_minutes)
        self.jobs = trace_jobs(self.trace, pool_map, seed)

    def __iter__(self) -> Iterator[JobRequest]:
        return iter(self.jobs)
