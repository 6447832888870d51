"""Run static, policy and oracle over one trace and assemble the report (a JSON-ready dict)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recommender.backtest.engine import Prepared, RunResult, run
from recommender.backtest.metrics import summarize
from recommender.backtest.model import ModelParams
from recommender.backtest.oracle import OracleParams, OracleStrategy
from recommender.backtest.strategies import PolicyStrategy, StaticStrategy
from recommender.backtest.trace import Trace
from recommender.policies.rebalance import RebalanceParams


@dataclass(frozen=True)
class BacktestConfig:
    """Model assumptions and each strategy's parameters."""

    model: ModelParams = field(default_factory=ModelParams)
    policy: RebalanceParams = field(default_factory=RebalanceParams)
    oracle: OracleParams = field(default_factory=OracleParams)


def run_strategies(
    trace: Trace, config: BacktestConfig, first: int = 0, stop: int | None = None
) -> dict[str, RunResult]:
    """Raw tallies of the three strategies over the evaluation window [first, stop)."""
    prepared = Prepared.of(trace, config.model.gpus_per_node)
    return {
        "static": run(prepared, StaticStrategy(), config.model, first, stop),
        "policy": run(
            prepared, PolicyStrategy(prepared, config.policy, config.model), config.model, first, stop
        ),
        "oracle": run(
            prepared, OracleStrategy(prepared, config.oracle, config.model), config.model, first, stop
        ),
    }


def build_report(
    trace: Trace, config: BacktestConfig, results: dict[str, RunResult], first: int, stop: int
) -> dict[str, Any]:
    """One object per strategy plus `meta` (trace, evaluation window, model assumptions)."""
    static = results["static"]
    parameters: dict[str, dict[str, Any]] = {
        "static": {},
        "policy": config.policy.as_dict(),
        "oracle": config.oracle.as_dict(),
    }
    report: dict[str, Any] = {
        "meta": {
            "pools": len(trace.pools),
            "trace_start": trace.start.isoformat(),
            "trace_end": trace.time_at(trace.steps).isoformat(),
            "step_min": trace.step_min,
            "eval_from": trace.time_at(first).isoformat(),
            "eval_to": trace.time_at(stop).isoformat(),
            "eval_days": round(static.eval_days, 4),
            "rows_running_above_capacity": trace.running_clamped,
            "rows_skipped": trace.rows_skipped,
            "rows_skipped_reasons": list(trace.skipped_reasons),
            "model": config.model.as_dict(),
            "wait_proxy": "p95 of waiting GPUs over minutes with demand; ratio (p95+node)/(p95_static+node)",
        }
    }
    for name, res in results.items():
        figures = summarize(res, static)
        figures["parameters"] = {"model": config.model.as_dict(), name: parameters[name]}
        report[name] = figures
    return report


def run_backtest(
    trace: Trace, config: BacktestConfig, first: int = 0, stop: int | None = None
) -> dict[str, Any]:
    """Run everything and return the report."""
    stop = trace.steps if stop is None else min(stop, trace.steps)
    return build_report(trace, config, run_strategies(trace, config, first, stop), first, stop)
