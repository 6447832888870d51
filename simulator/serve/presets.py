"""Ready-made clusters and their workloads for `ibpool simulate`.

Presets are two pools on a 2:1 oversubscribed fat tree (8 hosts per leaf): `recsys` (high priority class,
recommender training by day: small, short, chatty jobs) and `llm` (LLM pretraining by night: 16-64 GPU
jobs for hours), split half and half. `small` has 32 nodes, `large` 1,024; `--nodes` resizes either.

A spec file gets the same day/night generator on its first two pools, and a flat stream of 8-16 GPU jobs
(about 60 % load) on any further pool; a one-pool spec gets a day-peaking stream. A trace replaces the
generator (see simulator.cluster.trace); without a spec file the trace sizes the cluster itself.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from simulator.cluster.spec import ClusterSpec, simple_spec
from simulator.cluster.trace import map_pools, read_trace, spec_for_trace, trace_jobs
from simulator.cluster.workload import GeneratedWorkload, JobRequest, PoolWorkload, day_night_workload

PRESETS = {"small": 32, "large": 1024}
FLAT_LOAD = 0.6


def preset_spec(name: str, nodes: int | None = None, seed: int = 1, start_hour: float = 0.0) -> ClusterSpec:
    """The preset `name` with `nodes` nodes (default: the preset's size), half in each pool."""
    count = nodes if nodes is not None else PRESETS[name]
    day = count // 2
    spec = simple_spec(
        {"recsys": day, "llm": count - day},
        hosts_per_leaf=8,
        oversubscription=2.0,
        seed=seed,
        priority={"recsys": "high"},
    )
    return replace(spec, start_hour=start_hour)


def _flat(pool: str, gpus: int, peak_hour: float, amplitude: float) -> PoolWorkload:
    shape = PoolWorkload(pool, 0.0, sizes=((8, 1.0), (16, 1.0)), median_minutes=60.0, peak_hour=peak_hour)
    mean_gpus = sum(s * w for s, w in shape.sizes) / sum(w for _, w in shape.sizes)
    mean_hours = shape.median_minutes * math.exp(shape.sigma**2 / 2) / 60.0
    return replace(shape, jobs_per_hour=FLAT_LOAD * gpus / (mean_gpus * mean_hours), amplitude=amplitude)


def generated_workload(spec: ClusterSpec, seed: int | None = None) -> GeneratedWorkload:
    """Day/night demand on the first two pools, a flat stream on the others (see the module docstring)."""
    seed = spec.seed if seed is None else seed
    gpus = [len(pool.nodes) * spec.gpus_per_node for pool in spec.pools]
    names = [pool.name for pool in spec.pools]
    if len(names) == 1:
        return GeneratedWorkload([_flat(names[0], gpus[0], 14.0, 0.6)], seed, spec.start_hour)
    base = day_night_workload(names[0], names[1], gpus[0], gpus[1], seed=seed, start_hour=spec.start_hour)
    extra = [_flat(name, count, 0.0, 0.0) for name, count in zip(names[2:], gpus[2:], strict=True)]
    return GeneratedWorkload([*base.pools, *extra], seed, spec.start_hour)


def trace_workload(
    path: Path, spec: ClusterSpec | None, seed: int, max_minutes: int | None = None
) -> tuple[ClusterSpec, list[JobRequest]]:
    """The spec (the given one, or one sized by the trace) and the jobs replaying the trace on it."""
    trace = read_trace(path, max_minutes)
    if spec is None:
        spec = spec_for_trace(trace, seed=seed)
    mapping = map_pools(trace, [pool.name for pool in spec.pools])
    return spec, trace_jobs(trace, mapping, seed)
