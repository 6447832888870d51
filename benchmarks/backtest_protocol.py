"""The evaluation protocol of docs/backtest.md: the planner, frozen, on every split and stress variant.

Items, all from the shared trace's first nine days (May 10 has no jobs):
- rolling-origin splits: the planner runs from May 1, scored from May 4, May 6 and May 8 to the end;
- the whole trace, scored from the start;
- stress variants scored over their whole span: pending x2, pending x3, roles swapped, roles swapped with
  pending x2, and the days shuffled in 3-day blocks (order 3, 1, 2);
- with `--held-out`, `--held-out-4` ... `--held-out-9`, each round's held-out busier items (protocol items
  5-11 of docs/backtest.md: each set run once, blind, for its round's final report, then development data).
For each item it prints policy, static, scheduler-native sharing, the budgeted reference plan (the target's
ceiling), the planner with hindsight, the upper bound at the planner's budget and the unbudgeted bound
(coverage beyond static, coverage, moves per pool-day, reversals per 30 days, worst p95 and p99 wait
ratios, work lost to preemption) and which targets the policy meets. `--no-profile` runs the planner
without its time-of-day profile (to measure what it adds).

    .venv/bin/python -m benchmarks.backtest_protocol [--trace PATH] [--only NAME ...] [--out OUT]
        [--held-out] [--held-out-4 ... --held-out-9] [--no-profile]
        [--policy-param NAME=VALUE ...] [--model-param NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from foundation.settings import add_hidden_alias
from recommender.backtest.model import ModelParams
from recommender.backtest.report import STRATEGIES, BacktestConfig, run_backtest
from recommender.backtest.targets import verdict
from recommender.backtest.trace import Trace, load_trace, slice_trace
from recommender.policies.rebalance import RebalanceParams

DEFAULT_TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "helios-earth-may01-10.csv.gz"
DAYS = 9
ORIGINS = (3, 5, 7)  # days after the start: May 4, May 6, May 8
BLOCK_ORDER = (2, 0, 1)  # 3-day blocks: days 7-9, then 1-3, then 4-6
SEEDS = (1001, 1002, 1003)  # held-out shuffles (rounds 2-3; development data since round 4)
SEEDS_4 = (4001, 4002, 4003)  # round-four held-out shuffles (development data since round five)
SEEDS_5 = (5001, 5002, 5003)  # round-five held-out shuffles (development data since round six)
SEEDS_6 = (6001, 6002, 6003)  # round-six held-out shuffles (development data since round seven)
SEEDS_7 = (7001, 7002, 7003)  # round-seven held-out shuffles (development data since round eight)
SEEDS_8 = (8001, 8002, 8003)  # round-eight held-out shuffles (development data since round nine)
SEEDS_9 = (9001, 9002, 9003)  # round-nine held-out shuffles (run once; development data since)
BUSIER = 2.2  # the later weeks' pending GPU-minutes per day against May 1-10


def scaled(trace: Trace, factor: float) -> Trace:
    """Every pool's pending multiplied (capacity and running unchanged)."""
    return replace(trace, pending=tuple([round(factor * q) for q in s] for s in trace.pending))


def reassigned(trace: Trace, source_rank: Callable[[int, int], int]) -> Trace:
    """Pools ranked by mean demand / capacity; rank i gets the demand of rank `source_rank(i, n)`, scaled
    to its capacity (running up to its capacity, the rest pending; pending beside idle GPUs kept as
    pending)."""
    n = len(trace.pools)

    def load(p: int) -> float:
        cap = sum(trace.capacity[p]) or 1
        return sum(r + q for r, q in zip(trace.running[p], trace.pending[p], strict=True)) / cap

    order = sorted(range(n), key=lambda p: (load(p), trace.pools[p]))
    source = {order[i]: order[source_rank(i, n)] for i in range(n)}
    running, pending = [], []
    for p in range(n):
        src = source[p]
        factor = (max(trace.capacity[p]) or 1) / (max(trace.capacity[src]) or 1)
        run_row, pend_row = [], []
        for cap, r, q in zip(trace.capacity[p], trace.running[src], trace.pending[src], strict=True):
            r2, q2 = round(r * factor), round(q * factor)
            run_row.append(min(cap, r2))
            pend_row.append(q2 + max(0, r2 - cap))
        running.append(run_row)
        pending.append(pend_row)
    return replace(trace, running=tuple(running), pending=tuple(pending))


def swapped(trace: Trace) -> Trace:
    """Roles swapped: the busiest pools get the quietest pools' demand and the reverse."""
    return reassigned(trace, lambda i, n: n - 1 - i)


def rotated(trace: Trace, part: int = 2) -> Trace:
    """Roles rotated by a `part`-th: rank i gets the demand of rank (i + n // part) mod n."""
    return reassigned(trace, lambda i, n: (i + n // part) % n)


def reordered(trace: Trace, order: list[int]) -> Trace:
    """Every pool's series taken at the steps of `order`, in that order."""

    def cut(series: list[int]) -> list[int]:
        return [series[i] for i in order]

    return replace(
        trace,
        capacity=tuple(cut(s) for s in trace.capacity),
        running=tuple(cut(s) for s in trace.running),
        pending=tuple(cut(s) for s in trace.pending),
    )


def blocks_reordered(trace: Trace, days: int, order: Iterable[int]) -> Trace:
    """The series cut into blocks of `days` whole days, put back in `order` (every pool alike)."""
    block = days * round(1440 / trace.step_min)
    return reordered(trace, [b * block + i for b in order for i in range(block)])


def shuffled(trace: Trace) -> Trace:
    """The days cut into 3-day blocks, put back in BLOCK_ORDER (every pool alike)."""
    return blocks_reordered(trace, 3, BLOCK_ORDER)


def days_shuffled(trace: Trace, seed: int) -> Trace:
    """The whole days put back in a random order (`random.Random(seed).shuffle`, every pool alike)."""
    days = list(range(trace.steps // round(1440 / trace.step_min)))
    random.Random(seed).shuffle(days)
    return blocks_reordered(trace, 1, days)


def held_out_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The held-out busier items of docs/backtest.md (run only for a round's final report)."""
    per_day = round(1440 / base.step_min)
    out = [("held-out: pending x2, May 8-9", scaled(base, 2.0), 7 * per_day)]
    out += [(f"held-out: days shuffled x2, seed {s}", scaled(days_shuffled(base, s), 2.0), 0) for s in SEEDS]
    out.append(("held-out: swapped x1.5, May 6-9", scaled(swapped(base), 1.5), 5 * per_day))
    return out


def busier_shuffles(base: Trace, label: str, seeds: tuple[int, ...]) -> list[tuple[str, Trace, int]]:
    """The whole days in a random order per seed, pending x BUSIER, scored whole."""
    return [
        (f"{label}: days shuffled x{BUSIER}, seed {s}", scaled(days_shuffled(base, s), BUSIER), 0)
        for s in seeds
    ]


def held_out_4_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The round-four held-out items of docs/backtest.md (declared before round four; run once)."""
    per_day = round(1440 / base.step_min)
    return [
        *busier_shuffles(base, "held-out 4", SEEDS_4),
        ("held-out 4: roles rotated x1.5", scaled(rotated(base), 1.5), 0),
        (f"held-out 4: swapped x{BUSIER}, May 5-9", scaled(swapped(base), BUSIER), 4 * per_day),
    ]


def held_out_5_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The round-five held-out items of docs/backtest.md (declared before round five; run once)."""
    per_day = round(1440 / base.step_min)
    return [
        *busier_shuffles(base, "held-out 5", SEEDS_5),
        ("held-out 5: roles rotated by a third x2", scaled(rotated(base, 3), 2.0), 0),
        ("held-out 5: pending x2.5, May 3-9", scaled(base, 2.5), 2 * per_day),
    ]


def days_reversed(trace: Trace) -> Trace:
    """The whole days put back last first (every pool alike)."""
    return blocks_reordered(trace, 1, reversed(range(trace.steps // round(1440 / trace.step_min))))


def held_out_6_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The round-six held-out items of docs/backtest.md (declared before round six; run once)."""
    per_day = round(1440 / base.step_min)
    return [
        *busier_shuffles(base, "held-out 6", SEEDS_6),
        (f"held-out 6: roles rotated by a quarter x{BUSIER}", scaled(rotated(base, 4), BUSIER), 0),
        (
            f"held-out 6: days reversed x{BUSIER}, from the fourth day",
            scaled(days_reversed(base), BUSIER),
            3 * per_day,
        ),
    ]


def held_out_7_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The round-seven held-out items of docs/backtest.md (declared before round seven; run once)."""
    return [
        *busier_shuffles(base, "held-out 7", SEEDS_7),
        (f"held-out 7: roles rotated by a fifth x{BUSIER}", scaled(rotated(base, 5), BUSIER), 0),
        ("held-out 7: swapped, days reversed x2", scaled(days_reversed(swapped(base)), 2.0), 0),
    ]


def held_out_8_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The round-eight held-out items of docs/backtest.md (declared before round eight; run once)."""
    return [
        *busier_shuffles(base, "held-out 8", SEEDS_8),
        ("held-out 8: roles rotated by a sixth x1.5", scaled(rotated(base, 6), 1.5), 0),
        (
            "held-out 8: swapped, days shuffled x2, seed 8004",
            scaled(days_shuffled(swapped(base), 8004), 2.0),
            0,
        ),
    ]


def held_out_9_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The round-nine held-out items of docs/backtest.md (declared before round nine; run once)."""
    return [
        *busier_shuffles(base, "held-out 9", SEEDS_9),
        (f"held-out 9: roles rotated by a seventh x{BUSIER}", scaled(rotated(base, 7), BUSIER), 0),
        (
            "held-out 9: rotated by a third, days shuffled x2, seed 9004",
            scaled(days_shuffled(rotated(base, 3), 9004), 2.0),
            0,
        ),
    ]


HELD_OUT_SETS: tuple[tuple[str, Callable[[Trace], list[tuple[str, Trace, int]]], str], ...] = (
    ("--held-out", held_out_items, "second and third rounds' held-out items (development data)"),
    ("--held-out-4", held_out_4_items, "round-four held-out items (development data)"),
    ("--held-out-5", held_out_5_items, "round-five held-out items (development data)"),
    ("--held-out-6", held_out_6_items, "round-six held-out items (development data)"),
    ("--held-out-7", held_out_7_items, "round-seven held-out items (development data)"),
    ("--held-out-8", held_out_8_items, "round-eight held-out items (development data since round nine)"),
    ("--held-out-9", held_out_9_items, "round-nine held-out items (run once; development data since)"),
)  # each round's held-out items, declared before the round (docs/backtest.md, protocol items 5-11)
HELD_OUT_UNSEEN: tuple[str, ...] = ()  # sets declared but not yet run: no diagnostic may read them


def items(base: Trace) -> list[tuple[str, Trace, int]]:
    """(name, trace, first scored step) for every protocol item."""
    per_day = round(1440 / base.step_min)
    variants: list[tuple[str, Callable[[Trace], Trace]]] = [
        ("pending x2", lambda t: scaled(t, 2.0)),
        ("pending x3", lambda t: scaled(t, 3.0)),
        ("roles swapped", swapped),
        ("swapped, pending x2", lambda t: scaled(swapped(t), 2.0)),
        ("blocks shuffled", shuffled),
    ]
    out = [(f"split from {(base.start + timedelta(days=d)):%b %d}", base, d * per_day) for d in ORIGINS]
    out.append(("whole trace", base, 0))
    out += [(name, make(base), 0) for name, make in variants]
    return out


def _pairs(items: list[str]) -> dict[str, float]:
    """NAME=VALUE pairs as numbers."""
    out: dict[str, float] = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name.strip()] = float(value)
    return out


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str]) -> int:
    """Run every item, print its table and the policy's verdict."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--only", action="append", default=[], help="run only items whose name contains this")
    out = parser.add_argument("--out", type=Path, dest="json", help="write every item's report summary here")
    add_hidden_alias(parser, "--json", out)
    for flag, _, what in HELD_OUT_SETS:
        parser.add_argument(flag, action="store_true", help=f"also run the {what}")
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="the planner without its time-of-day profile (to measure it)",
    )
    parser.add_argument(
        "--policy-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a planner constant (diagnostics only: the protocol scores the defaults)",
    )
    parser.add_argument(
        "--model-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a model assumption, e.g. reclaim_delay_min=10 (diagnostics only)",
    )
    args = parser.parse_args(argv)
    source = load_trace(args.trace)
    per_day = round(1440 / source.step_min)
    base = slice_trace(source, 0, min(source.steps, DAYS * per_day))
    model = _pairs(args.model_param)
    gpus = int(model.pop("gpus_per_node", ModelParams.gpus_per_node))
    config = BacktestConfig(
        model=replace(ModelParams(), **model, gpus_per_node=gpus),
        policy=RebalanceParams.from_mapping(_pairs(args.policy_param)),
        profile=not args.no_profile,
    )
    summary: dict[str, Any] = {}
    met_all = 0
    every = items(base)
    for flag, make, _ in HELD_OUT_SETS:
        every += make(base) if getattr(args, flag[2:].replace("-", "_")) else []
    chosen = [x for x in every if not args.only or any(o in x[0] for o in args.only)]
    for name, trace, first in chosen:
        started = time.perf_counter()
        report = run_backtest(trace, config, first)
        wall = time.perf_counter() - started
        print(f"\n{name} ({report['meta']['eval_days']:.0f} days scored, {wall:.1f} s)")
        print(
            f"  {'strategy':<12} {'beyond':>7} {'coverage':>8} {'moves/pd':>8} {'rev/30d':>7} "
            f"{'p95':>6} {'p99':>6} {'lost':>8} {'reclaims':>8}"
        )
        for strategy in STRATEGIES:
            r = report[strategy]
            print(
                f"  {strategy:<12} {r['coverage_beyond_static']:>7.3f} {r['coverage']:>8.3f} "
                f"{_fmt(r['moves_per_pool_day'], '.3f'):>8} "
                f"{_fmt(r['reversals_within_60min_per_30_days'], '.2f'):>7} "
                f"{_fmt(r['worst_pool_p95_wait_ratio_vs_static'], '.3f'):>6} "
                f"{_fmt(r['worst_pool_p99_wait_ratio_vs_static'], '.3f'):>6} "
                f"{_fmt(r['lost_gpu_minutes'], '.0f'):>8} {_fmt(r.get('reclaim_moves'), 'd'):>8}"
            )
        checks = verdict(report)
        met_all += all(checks.values())
        missed = [k for k, ok in checks.items() if not ok]
        print(f"  policy meets {'every target' if not missed else 'all but: ' + ', '.join(missed)}")
        summary[name] = {
            s: {k: v for k, v in report[s].items() if k not in ("pools", "parameters")} for s in STRATEGIES
        }
        summary[name]["verdict"] = checks
    print(f"\nitems meeting every target: {met_all} of {len(chosen)}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
