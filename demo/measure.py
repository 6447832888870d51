"""Ground truth from the model, measured the same way for both twins and every counterfactual.

A `Meter` is a replay probe: at every sample (one simulated minute, standing for the minute that follows
it) inside its window it reads the model and adds the sample's share of time to its totals; `finish` adds
the jobs' waits. Everything is read from the model itself, not from the exporters, so the loop and the
static run are compared on the same footing. What each figure means: docs/demo.md ("The twin").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from simulator.cluster.model import ClusterModel

OVERALL = "overall"


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


@dataclass
class _Totals:
    seconds: float = 0.0
    capacity: float = 0.0  # GPU-seconds of capacity
    allocated: float = 0.0
    busy: float = 0.0  # utilization x GPUs x seconds
    served: float = 0.0  # the pool's own running GPUs x seconds
    pending: float = 0.0
    slowdown_time: float = 0.0  # seconds with multi-node jobs running
    slowdown_sum: float = 0.0


@dataclass(frozen=True)
class PoolResult:
    """One pool (or the whole cluster) over a window."""

    allocation: float | None
    utilization: float | None
    gpu_hours_served: float
    pending_gpu_minutes: float
    wait_p50_minutes: float | None
    wait_p95_minutes: float | None
    wait_p99_minutes: float | None
    jobs: int
    still_waiting: int
    multinode_slowdown: float | None


@dataclass(frozen=True)
class PriorityJob:
    """The high-priority pool's scripted job: its pace while it ran."""

    name: str
    iteration_seconds: float | None
    alone_seconds: float | None
    running_minutes: float

    @property
    def slowdown(self) -> float | None:
        """Iteration time over its time alone."""
        if self.iteration_seconds is None or not self.alone_seconds:
            return None
        return self.iteration_seconds / self.alone_seconds


@dataclass(frozen=True)
class Measurement:
    """Every pool and the whole cluster over [start, end], the priority job, and a series for charts."""

    start: float
    end: float
    pools: dict[str, PoolResult]
    priority: PriorityJob
    series: dict[str, list[tuple[float, float]]]

    def to_dict(self, *, series: bool = True) -> dict[str, Any]:
        """JSON-ready (without the per-minute series when `series` is False)."""
        data = asdict(self)
        data["priority"]["slowdown"] = self.priority.slowdown
        if not series:
            del data["series"]
        return data


@dataclass
class Meter:
    """A probe that measures a model inside [start, end] every `every` seconds (see the module docstring)."""

    start: float
    end: float
    every: float
    priority_pool: str
    priority_job: str
    totals: dict[str, _Totals] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    _priority: list[tuple[float, float]] = field(default_factory=list)  # (iteration, alone) per sample

    def __call__(self, model: ClusterModel) -> None:
        if not self.start - 1e-9 <= model.now < self.end - 1e-9:  # a sample stands for [now, now + every)
            return
        dt = self.every
        view = model.scheduler_view()
        util = {name: sum(g.utilization for g in model.node_load(name).gpus) for name in view.nodes}
        jobs = model.job_metrics()
        overall = self.totals.setdefault(OVERALL, _Totals())
        up = [n for n in view.nodes.values() if n.state != "down"]
        self._add(overall, dt, sum(n.gpus for n in up), sum(n.allocated_gpus for n in up))
        overall.busy += sum(util[n.name] for n in up) * dt
        overall.served += sum(j.gpus for j in jobs) * dt
        overall.pending += sum(p.pending_gpus for p in view.pools.values()) * dt
        self._slowdowns(overall, [j.slowdown for j in jobs if len(j.nodes) > 1], dt)
        for name, pool in view.pools.items():
            totals = self.totals.setdefault(name, _Totals())
            self._add(totals, dt, pool.capacity_gpus, pool.allocated_gpus)
            totals.busy += sum(util[n] for n in pool.nodes) * dt
            totals.served += pool.running_gpus * dt
            totals.pending += pool.pending_gpus * dt
            self._slowdowns(totals, [j.slowdown for j in jobs if j.pool == name and len(j.nodes) > 1], dt)
            self.series.setdefault(f"{name} pending GPUs", []).append((model.now, float(pool.pending_gpus)))
        capacity = sum(n.gpus for n in up)
        allocated = sum(n.allocated_gpus for n in up)
        self.series.setdefault("allocation", []).append(
            (model.now, allocated / capacity if capacity else 0.0)
        )
        busy = sum(util[n.name] for n in up)
        self.series.setdefault("utilization", []).append((model.now, busy / capacity if capacity else 0.0))
        for job in jobs:
            if job.pool == self.priority_pool and job.name == self.priority_job:
                self._priority.append((job.iteration_seconds, job.iteration_alone_seconds))

    @staticmethod
    def _add(totals: _Totals, dt: float, capacity: float, allocated: float) -> None:
        totals.seconds += dt
        totals.capacity += capacity * dt
        totals.allocated += allocated * dt

    @staticmethod
    def _slowdowns(totals: _Totals, values: list[float], dt: float) -> None:
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            totals.slowdown_time += dt
            totals.slowdown_sum += sum(finite) / len(finite) * dt

    def finish(self, model: ClusterModel) -> Measurement:
        """The results, with the waits of the jobs submitted in the window."""
        waits: dict[str, list[float]] = {OVERALL: []}
        waiting: dict[str, int] = {OVERALL: 0}
        for job in model.jobs.values():
            submitted = job.request.submit_time
            if not self.start <= submitted < self.end:
                continue
            started = job.start_time if job.start_time is not None and job.start_time <= self.end else None
            wait = (started if started is not None else self.end) - submitted
            for key in (OVERALL, job.pool):
                waits.setdefault(key, []).append(wait / 60.0)
                waiting[key] = waiting.get(key, 0) + (started is None)
        pools = {}
        for name, t in sorted(self.totals.items()):
            w = waits.get(name, [])
            pools[name] = PoolResult(
                allocation=t.allocated / t.capacity if t.capacity else None,
                utilization=t.busy / t.capacity if t.capacity else None,
                gpu_hours_served=t.served / 3600.0,
                pending_gpu_minutes=t.pending / 60.0,
                wait_p50_minutes=percentile(w, 50),
                wait_p95_minutes=percentile(w, 95),
                wait_p99_minutes=percentile(w, 99),
                jobs=len(w),
                still_waiting=waiting.get(name, 0),
                multinode_slowdown=t.slowdown_sum / t.slowdown_time if t.slowdown_time else None,
            )
        finite = [(i, a) for i, a in self._priority if math.isfinite(i)]
        priority = PriorityJob(
            name=self.priority_job,
            iteration_seconds=sum(i for i, _ in finite) / len(finite) if finite else None,
            alone_seconds=finite[0][1] if finite else None,
            running_minutes=len(self._priority) * self.every / 60.0,
        )
        return Measurement(self.start, self.end, pools, priority, dict(self.series))
