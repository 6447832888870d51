"""What the loop run writes each cycle: the pools, links and QoS series of the run directory (CSV).

Per cycle and pool: capacity, allocated, pending, jobs, GPU utilization (as the recommender read it from the
exporters), mean/max iteration time and slowdown of its multi-node jobs; per port with traffic: congestion,
utilization, the pools crossing it; the VL arbitration tables in force. These feed the report's charts;
the comparison with the static twin is measured on the model itself (`demo.measure`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from demo.record import RunDir, rfc3339
from recommender.signals.model import Signals
from simulator.cluster.model import ClusterModel


@dataclass(frozen=True)
class PoolSample:
    """One pool at one cycle."""

    capacity_gpus: int
    allocated_gpus: int
    pending_gpus: int
    running_jobs: int
    pending_jobs: int
    utilization: float | None
    multinode_jobs: int
    iteration_seconds: float | None
    slowdown_mean: float | None
    slowdown_max: float | None


@dataclass(frozen=True)
class Sample:
    """Every pool at one cycle, and the worst fabric wait share."""

    t: float
    pools: dict[str, PoolSample]
    worst_link_wait: float | None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def sample(model: ClusterModel, signals: Signals | None) -> Sample:
    """The pools as the scheduler and the recommender's signals see them now."""
    view = model.scheduler_view()
    pools: dict[str, PoolSample] = {}
    for name, pool in view.pools.items():
        jobs = [j for j in model.job_metrics(name) if len(j.nodes) > 1]
        finite = [j for j in jobs if math.isfinite(j.iteration_seconds)]
        util = None
        if signals is not None and name in signals.pools:
            util = signals.pools[name].utilization
        pools[name] = PoolSample(
            capacity_gpus=pool.capacity_gpus,
            allocated_gpus=pool.allocated_gpus,
            pending_gpus=pool.pending_gpus,
            running_jobs=pool.running_jobs,
            pending_jobs=pool.pending_jobs,
            utilization=util,
            multinode_jobs=len(jobs),
            iteration_seconds=_mean([j.iteration_seconds for j in finite]),
            slowdown_mean=_mean([j.slowdown for j in finite]),
            slowdown_max=max((j.slowdown for j in finite), default=None),
        )
    worst = None
    if signals is not None:
        waits = [x.congestion for x in signals.links.values() if x.kind == "fabric" and x.congestion]
        worst = max(waits, default=0.0)
    return Sample(model.now, pools, worst)


def write(run_dir: RunDir, model: ClusterModel, unix: float, item: Sample, signals: Signals | None) -> None:
    """One cycle's rows of series/pools.csv, series/qos.csv and series/links.csv."""
    stamp = rfc3339(unix)
    for name, pool in sorted(item.pools.items()):
        run_dir.pools.writerow(
            {
                "time": stamp,
                "t": item.t,
                "pool": name,
                "capacity_gpus": pool.capacity_gpus,
                "allocated_gpus": pool.allocated_gpus,
                "pending_gpus": pool.pending_gpus,
                "running_jobs": pool.running_jobs,
                "pending_jobs": pool.pending_jobs,
                "gpu_utilization": _num(pool.utilization),
                "multinode_jobs": pool.multinode_jobs,
                "iteration_seconds_mean": _num(pool.iteration_seconds),
                "slowdown_mean": _num(pool.slowdown_mean),
                "slowdown_max": _num(pool.slowdown_max),
            }
        )
    qos = model.qos()
    run_dir.qos.writerow(
        {
            "time": stamp,
            "t": item.t,
            "vlarb_high": ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_high),
            "vlarb_low": ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_low),
            "sl2vl": ",".join(map(str, qos.sl2vl)),
        }
    )
    if signals is None:
        return
    for link in signals.links.values():
        if not link.utilization and not link.congestion:
            continue
        run_dir.links.writerow(
            {
                "time": stamp,
                "t": item.t,
                "link": link.key,
                "kind": link.kind,
                "desc": link.desc,
                "congestion": _num(link.congestion),
                "utilization": _num(link.utilization),
                "saturated": int(link.saturated),
                "pools": ";".join(link.pools),
            }
        )
