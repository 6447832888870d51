"""`ibpool backtest --trace FILE --json OUT`: replay a per-pool minute trace under static, policy, oracle."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from recommender.backtest.errors import BacktestError
from recommender.backtest.model import ModelParams
from recommender.backtest.oracle import OracleParams
from recommender.backtest.report import BacktestConfig, run_backtest
from recommender.backtest.trace import load_trace, parse_time
from recommender.policies.rebalance import RebalanceParams, RebalanceParamsError

COLUMNS = (
    ("coverage", "coverage", "{:.3f}"),
    ("served_gpu_minutes", "served GPU-min", "{:.0f}"),
    ("allocation_utilization", "alloc util", "{:.3f}"),
    ("moves", "moves", "{}"),
    ("moves_per_pool_day", "moves/pool/day", "{:.3f}"),
    ("reversals_within_60min", "reversals<60m", "{}"),
    ("worst_pool_p95_wait_ratio_vs_static", "worst p95 wait ratio", "{:.3f}"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ibpool backtest", description=__doc__)
    parser.add_argument("--trace", type=Path, required=True, help="per-pool minute series, CSV or CSV.gz")
    parser.add_argument("--json", type=Path, required=True, dest="json_out", help="write the report here")
    parser.add_argument("--eval-from", help="score from this time (ISO 8601); earlier steps only warm up")
    parser.add_argument("--eval-to", help="score up to (not including) this time (ISO 8601)")
    parser.add_argument("--gpus-per-node", type=int, default=ModelParams.gpus_per_node)
    parser.add_argument("--drain-delay-min", type=float, default=ModelParams.drain_delay_min)
    parser.add_argument("--preempt-loss-min", type=float, default=ModelParams.preempt_loss_min)
    parser.add_argument("--oracle-lookahead-min", type=float, default=OracleParams.lookahead_min)
    parser.add_argument("--oracle-min-use-min", type=float, default=OracleParams.min_use_min)
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


def format_table(report: dict[str, Any]) -> str:
    """A fixed-width summary, one row per strategy."""
    head = f"{'strategy':<8} " + " ".join(f"{title:>{max(len(title), 8)}}" for _, title, _ in COLUMNS)
    lines = [head]
    for name in ("policy", "static", "oracle"):
        cells = [f"{fmt.format(report[name][key]):>{max(len(title), 8)}}" for key, title, fmt in COLUMNS]
        lines.append(f"{name:<8} " + " ".join(cells))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the backtest; 0 on success, 2 on bad input, 1 when the report cannot be written."""
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        config = BacktestConfig(
            model=ModelParams(args.gpus_per_node, args.drain_delay_min, args.preempt_loss_min),
            policy=_policy_params(args.policy_param),
            oracle=OracleParams(args.oracle_lookahead_min, args.oracle_min_use_min),
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
    report["meta"]["trace_file"] = str(args.trace)
    report["meta"]["wall_seconds"] = round(time.perf_counter() - started, 3)
    try:
        args.json_out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"ibpool backtest: cannot write {args.json_out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        meta = report["meta"]
        print(f"{args.trace}: {meta['pools']} pools, scored {meta['eval_from']} .. {meta['eval_to']}")
        print(format_table(report))
        print(f"{meta['wall_seconds']:.1f} s; report: {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
