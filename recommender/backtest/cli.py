"""`ibpool backtest --trace FILE --json OUT`: replay a per-pool minute trace under the planner and its
references (static, scheduler-native sharing, the budgeted reference plan, the planner with hindsight, the
upper bound at the planner's budget, the unbudgeted bound)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from recommender.backtest.errors import BacktestError
from recommender.backtest.model import ModelParams
from recommender.backtest.report import STRATEGIES, BacktestConfig, run_backtest
from recommender.backtest.targets import Check, checks
from recommender.backtest.trace import load_trace, parse_time
from recommender.policies.rebalance import RebalanceParams, RebalanceParamsError

COLUMNS = (
    ("coverage_beyond_static", "beyond static", "{:.3f}"),
    ("coverage", "coverage", "{:.3f}"),
    ("moves_per_pool_day", "moves/pool/day", "{:.3f}"),
    ("reversals_within_60min_per_30_days", "reversals/30d", "{:.2f}"),
    ("worst_pool_p95_wait_ratio_vs_static", "worst p95 ratio", "{:.3f}"),
    ("worst_pool_p99_wait_ratio_vs_static", "worst p99 ratio", "{:.3f}"),
    ("lost_gpu_minutes", "lost GPU-min", "{:.0f}"),
)
POOL_COLUMNS = (
    ("pending_gpu_minutes", "pending", "{:.0f}"),
    ("served_gpu_minutes", "covered", "{:.0f}"),
    ("moves_in", "lends in", "{}"),
    ("moves_out", "lends out", "{}"),
    ("takebacks_in", "take-backs", "{}"),
    ("reclaims_in", "reclaims", "{}"),
    ("p95_wait_ratio_vs_static", "p95 ratio", "{:.2f}"),
    ("p99_wait_ratio_vs_static", "p99 ratio", "{:.2f}"),
    ("lost_gpu_minutes", "lost", "{:.0f}"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ibpool backtest", description=__doc__)
    parser.add_argument("--trace", type=Path, required=True, help="per-pool minute series, CSV or CSV.gz")
    parser.add_argument("--out", type=Path, dest="json_out", help="write the JSON report here")
    parser.add_argument(
        "--json", type=Path, dest="json_out", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    parser.add_argument("--eval-from", help="score from this time (ISO 8601); earlier steps only warm up")
    parser.add_argument("--eval-to", help="score up to (not including) this time (ISO 8601)")
    parser.add_argument("--gpus-per-node", type=int, default=ModelParams.gpus_per_node)
    parser.add_argument("--drain-delay-min", type=float, default=ModelParams.drain_delay_min)
    parser.add_argument("--preempt-loss-min", type=float, default=ModelParams.preempt_loss_min)
    parser.add_argument("--reclaim-delay-min", type=float, default=ModelParams.reclaim_delay_min)
    parser.add_argument(
        "--policy-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a policy parameter",
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the summary table")
    return parser


def _policy_params(pairs: list[str]) -> RebalanceParams:
    values: dict[str, float] = {}
    bad = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            values[name.strip()] = float(value)
        except ValueError:
            bad.append(pair)
        if not sep:
            bad.append(pair)
    if bad:
        raise RebalanceParamsError(f"--policy-param needs NAME=NUMBER: {', '.join(bad)}")
    return RebalanceParams.from_mapping(values)


def _cell(value: Any, fmt: str, width: int) -> str:
    return f"{'-' if value is None else fmt.format(value):>{width}}"


def format_table(report: dict[str, Any]) -> str:
    """A fixed-width summary, one row per strategy."""
    widths = [max(len(title), 8) for _, title, _ in COLUMNS]
    head = f"{'strategy':<12} " + " ".join(f"{t:>{w}}" for (_, t, _), w in zip(COLUMNS, widths, strict=True))
    lines = [head]
    for name in STRATEGIES:
        if name not in report:
            continue
        cells = [_cell(report[name][k], f, w) for (k, _, f), w in zip(COLUMNS, widths, strict=True)]
        lines.append(f"{name:<12} " + " ".join(cells))
    return "\n".join(lines)


def format_pools(report: dict[str, Any], strategy: str = "policy") -> str:
    """The strategy's per-pool table (pending, covered, lends in and out, take-backs, waits, losses)."""
    pools = report[strategy]["pools"]
    widths = [max(len(title), 7) for _, title, _ in POOL_COLUMNS]
    head = f"{'pool':<12} " + " ".join(f"{t:>{w}}" for (_, t, _), w in zip(POOL_COLUMNS, widths, strict=True))
    lines = [head]
    for name in sorted(pools):
        row = pools[name]
        cells = [_cell(row[k], f, w) for (k, _, f), w in zip(POOL_COLUMNS, widths, strict=True)]
        lines.append(f"{name:<12} " + " ".join(cells))
    return "\n".join(lines)


def format_blocked(report: dict[str, Any]) -> str:
    """The policy's unmet GPU-minutes that coexisted with idle whole nodes elsewhere, by what blocked them."""
    blocked = report["policy"].get("blocked_unmet_gpu_minutes") or {}
    total = sum(blocked.values())
    lines = [f"unmet GPU-minutes beside idle nodes elsewhere: {total:.0f}"]
    lines += [f"  {cause:<32} {minutes:>10.0f}" for cause, minutes in blocked.items()]
    return "\n".join(lines)


def format_targets(judged: list[Check]) -> str:
    """The policy against each target (`recommender/backtest/targets.py`), a line each."""
    lines = ["policy against the targets:"]
    for check in judged:
        sign = ">=" if check.at_least else "<="
        mark = "met" if check.met else "MISSED"
        lines.append(f"  {check.what:<66} {check.value:>7.3f} {sign} {check.limit:<6.3f} {mark}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the backtest; 0 on success, 2 on bad input, 1 when the report cannot be written."""
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        config = BacktestConfig(
            model=ModelParams(
                args.gpus_per_node, args.drain_delay_min, args.preempt_loss_min, args.reclaim_delay_min
            ),
            policy=_policy_params(args.policy_param),
        )
        trace = load_trace(args.trace)
        if trace.rows_skipped:
            reasons = "; ".join(trace.skipped_reasons)
            skipped = f"skipped {trace.rows_skipped} malformed rows ({reasons})"
            print(f"ibpool backtest: {skipped}", file=sys.stderr)
        first = trace.step_at(parse_time(args.eval_from)) if args.eval_from else 0
        stop = trace.step_at(parse_time(args.eval_to)) if args.eval_to else trace.steps
        if stop <= first:
            raise BacktestError("the evaluation window is empty")
        report = run_backtest(trace, config, first, stop)
    except (BacktestError, RebalanceParamsError, ValueError) as exc:
        print(f"ibpool backtest: {exc}", file=sys.stderr)
        return 2
    judged = checks(report)
    report["policy"]["targets"] = {check.name: check.as_dict() for check in judged}
    report["meta"]["trace_file"] = str(args.trace)
    report["meta"]["wall_seconds"] = round(time.perf_counter() - started, 3)
    try:
        if args.json_out is not None:
            args.json_out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"ibpool backtest: cannot write {args.json_out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        meta = report["meta"]
        print(f"{args.trace}: {meta['pools']} pools, scored {meta['eval_from']} .. {meta['eval_to']}")
        print(format_table(report))
        print()
        print(format_pools(report))
        print()
        print(format_blocked(report))
        print()
        print(format_targets(judged))
        print(f"{meta['wall_seconds']:.1f} s" + (f"; report: {args.json_out}" if args.json_out else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
