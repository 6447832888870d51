"""Robustness probe: the rebalancing policy on day-rotated variants of a trace (stand-ins for other clusters).

Each variant rotates every pool's series (its first `--days` days) by a random whole number of days, one
draw per pool (seeded): time of day and each pool's own pattern stay, the alignment between pools
changes. Pending can be scaled (`--scale 0.5` quieter, `--scale 2` busier). Every variant is scored over
its whole span against `static`; the probe prints each variant and then the mean and minimum coverage,
the largest moves per pool-day, the reversals and how many variants break the p95 wait-ratio target.

    .venv/bin/python -m benchmarks.backtest_rotations [--variants 30] [--scale 1] [--policy-param K=V ...]
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace
from pathlib import Path

from recommender.backtest.engine import Prepared, run
from recommender.backtest.metrics import summarize
from recommender.backtest.model import ModelParams
from recommender.backtest.strategies import PolicyStrategy, StaticStrategy
from recommender.backtest.trace import Trace, load_trace
from recommender.policies.rebalance import RebalanceParams

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "helios-earth-may01-10.csv.gz"
RATIO_TARGET = 1.05


def rotated(trace: Trace, days: int, seed: int, scale: float) -> Trace:
    """The trace's first `days` days, each pool rotated by a random whole number of days."""
    per_day = round(1440 / trace.step_min)
    span = min(trace.steps, days * per_day)
    rng = random.Random(seed)
    shifts = [rng.randrange(days) * per_day for _ in trace.pools]

    def turn(series: list[int], k: int) -> list[int]:
        head = series[:span]
        return head[k:] + head[:k]

    return replace(
        trace,
        capacity=tuple(turn(s, k) for s, k in zip(trace.capacity, shifts, strict=True)),
        running=tuple(turn(s, k) for s, k in zip(trace.running, shifts, strict=True)),
        pending=tuple(
            [int(scale * q) for q in turn(s, k)] for s, k in zip(trace.pending, shifts, strict=True)
        ),
    )


def main(argv: list[str]) -> int:
    """Run the variants, print one line each and the summary."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--days", type=int, default=9, help="days of the trace (Earth's May 10 is empty)")
    parser.add_argument("--variants", type=int, default=30)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every pool's pending")
    parser.add_argument("--policy-param", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    pairs = (pair.split("=", 1) for pair in args.policy_param)
    params = RebalanceParams.from_mapping({name: float(value) for name, value in pairs})
    model = ModelParams()
    source = load_trace(args.trace)
    rows = []
    for seed in range(args.variants):
        prepared = Prepared.of(rotated(source, args.days, seed, args.scale), model.gpus_per_node)
        static = run(prepared, StaticStrategy(), model)
        figures = summarize(run(prepared, PolicyStrategy(prepared, params, model), model), static)
        rows.append(figures)
        print(
            f"variant {seed:3d}: coverage {figures['coverage']:.3f}  moves/pool/day "
            f"{figures['moves_per_pool_day']:.3f}  reversals {figures['reversals_within_60min']}  "
            f"worst p95 wait ratio {figures['worst_pool_p95_wait_ratio_vs_static']:.3f}"
        )
    coverage = [r["coverage"] for r in rows]
    broken = sum(r["worst_pool_p95_wait_ratio_vs_static"] > RATIO_TARGET for r in rows)
    print(
        f"{len(rows)} variants (pending x{args.scale:g}): coverage mean {sum(coverage) / len(coverage):.3f} "
        f"min {min(coverage):.3f}; largest moves/pool/day {max(r['moves_per_pool_day'] for r in rows):.3f}; "
        f"reversals {sum(r['reversals_within_60min'] for r in rows)}; p95 ratio > {RATIO_TARGET} in {broken}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
