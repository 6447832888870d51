"""Cluster-model speed: simulated minutes per wall second for 100 and 1,000 nodes (8 GPUs each).

The workload is the generated day/night one (a recommender pool by day, an LLM pool by night) at an offered
load above capacity, so most GPUs stay busy and queues never empty; the fabric is a 2:1 oversubscribed
fat tree. Each size warms up (default 6 simulated hours) before the timed run. With `--trace` it also
replays the shared per-pool minute trace (107 nodes, 16 pools).

    .venv/bin/python -m benchmarks.simulation_speed [--minutes 60] [--warmup-hours 6] [--trace PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from simulator.cluster import ClusterModel, TraceWorkload, day_night_workload, simple_spec, spec_for_trace


def busy_share(model: ClusterModel) -> float:
    """Share of GPUs allocated now."""
    view = model.scheduler_view()
    used = sum(n.allocated_gpus for n in view.nodes.values())
    return used / sum(n.gpus for n in view.nodes.values())


def measure(model: ClusterModel, minutes: int) -> tuple[float, float]:
    """(wall seconds per simulated minute, simulated minutes per wall second) over `minutes`."""
    start = time.perf_counter()
    model.advance(minutes * 60.0)
    wall = time.perf_counter() - start
    return wall / minutes, minutes / wall


def report(label: str, model: ClusterModel, minutes: int) -> None:
    """Time one run and print its figures."""
    per_minute, rate = measure(model, minutes)
    print(
        f"{label:<34} {rate:10.1f} sim min/wall s  {per_minute * 1000:8.2f} ms wall/sim min  "
        f"busy {busy_share(model):5.1%}  running jobs {len(model.running):4d}  "
        f"channels in use {len(model.fabric.rate):5d}"
    )


def main(argv: list[str]) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=int, default=60, help="simulated minutes timed per size")
    parser.add_argument("--warmup-hours", type=float, default=6.0)
    parser.add_argument("--tick", type=float, default=10.0, help="tick seconds")
    parser.add_argument("--trace", type=Path, help="also replay this per-pool minute trace")
    args = parser.parse_args(argv)
    for nodes in (100, 1000):
        half = nodes // 2
        spec = simple_spec(
            {"recsys": half, "llm": nodes - half}, oversubscription=2.0, tick_seconds=args.tick
        )
        workload = day_night_workload("recsys", "llm", half * 8, (nodes - half) * 8, seed=1, load=1.2)
        model = ClusterModel(spec, workload)
        start = time.perf_counter()
        model.advance(args.warmup_hours * 3600)
        warm = time.perf_counter() - start
        print(f"{nodes} nodes: warm-up of {args.warmup_hours:g} h took {warm:.1f} s wall")
        report(f"{nodes} nodes, {nodes // 8 * 1} leaves, tick {args.tick:g} s", model, args.minutes)
    if args.trace is not None:
        workload_t = TraceWorkload(args.trace)
        spec_t = spec_for_trace(workload_t.trace, tick_seconds=args.tick)
        model_t = ClusterModel(spec_t, workload_t)
        report(f"trace replay, {len(spec_t.nodes)} nodes", model_t, min(workload_t.trace.minutes, 24 * 60))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
