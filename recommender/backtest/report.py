"""Run every strategy over one trace and assemble the report (a JSON-ready dict).

Strategies: `static` (no moves), `policy` (the planner on trailing signals), `sharing` (scheduler-native
borrowing with reclaim, no node moves: the operator's alternative), `reference` (the budgeted reference
plan: a hindsight greedy of long single-node loans at the policy's budget, replayed), `hindsight` (the
policy's own planner with the future as its forecast: what forecasting costs), `budget_bound` (an upper
bound for any strategy whose lends stay within the policy's token accrual) and `bound` (an upper bound for
any node-moving strategy: free, instant moves every minute).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from recommender.backtest.bound import BudgetBound, budget_bound
from recommender.backtest.engine import Prepared, RunResult, run
from recommender.backtest.hindsight import HindsightStrategy, instant_bound
from recommender.backtest.metrics import summarize
from recommender.backtest.model import ModelParams
from recommender.backtest.reference import Budget, PlanStrategy, reference_plan
from recommender.backtest.sharing import run_sharing
from recommender.backtest.strategies import PolicyStrategy, StaticStrategy
from recommender.backtest.trace import Trace
from recommender.policies.rebalance import RebalanceParams

STRATEGIES = (
    "policy",
    "static",
    "sharing",
    "reference",
    "ref_open_end",
    "hindsight",
    "budget_bound",
    "bound",
)
MOVING = ("policy", "reference", "ref_open_end", "hindsight")
BOUNDS = ("budget_bound", "bound")


@dataclass(frozen=True)
class BacktestConfig:
    """Model assumptions and the planner's parameters."""

    model: ModelParams = field(default_factory=ModelParams)
    policy: RebalanceParams = field(default_factory=RebalanceParams)
    profile: bool = True  # the planner's time-of-day profile; off only to measure what it adds


@dataclass
class Runs:
    """Raw tallies per strategy, and what blocked the policy's unmet demand (GPU-minutes by cause)."""

    results: dict[str, RunResult]
    blocked: dict[str, float]
    budget_bound: BudgetBound | None = None


def run_strategies(
    trace: Trace,
    config: BacktestConfig,
    first: int = 0,
    stop: int | None = None,
    only: Iterable[str] = STRATEGIES,
) -> Runs:
    """Raw tallies of the strategies over the evaluation window [first, stop)."""
    prepared = Prepared.of(trace, config.model.gpus_per_node)
    wanted = set(only) | {"static"}
    results: dict[str, RunResult] = {}
    blocked: dict[str, float] = {}
    results["static"] = run(prepared, StaticStrategy(), config.model, first, stop)
    if "policy" in wanted:
        policy = PolicyStrategy(prepared, config.policy, config.model, profile=config.profile)
        policy.first, policy.stop = first, stop
        results["policy"] = run(prepared, policy, config.model, first, stop)
        blocked = {k: round(v, 1) for k, v in sorted(policy.blocked.items(), key=lambda kv: -kv[1])}
    if "sharing" in wanted:
        results["sharing"] = run_sharing(prepared, config.model, first, stop)
    for name, prepaid in (("reference", True), ("ref_open_end", False)):
        if name in wanted:
            steps = _steps(config.policy.reversal_min, trace.step_min)
            budget = Budget(config.policy.moves_per_pool_day, steps, prepaid_end=prepaid)
            loans = reference_plan(prepared, config.model, budget, first, stop)
            results[name] = run(prepared, PlanStrategy(loans), config.model, first, stop)
    if "hindsight" in wanted:
        results["hindsight"] = run(
            prepared, HindsightStrategy(prepared, config.policy, config.model), config.model, first, stop
        )
    bounded: BudgetBound | None = None
    if "bound" in wanted or "budget_bound" in wanted:
        results["bound"] = instant_bound(prepared, config.model, first, stop)
    if "budget_bound" in wanted:
        delay = 1 + math.ceil(config.model.drain_delay_min / trace.step_min - 1e-9)
        g, mpd = config.model.gpus_per_node, config.policy.moves_per_pool_day
        bounded = budget_bound(
            prepared, gpus_per_node=g, drain_steps=delay, moves_per_pool_day=mpd, first=first, stop=stop
        )
    return Runs(results, blocked, bounded)


def _steps(minutes: float, step_min: float) -> int:
    return max(1, math.ceil(minutes / step_min - 1e-9))


def _budget_bound_figures(runs: Runs, instant: dict[str, Any], static: dict[str, Any]) -> dict[str, Any]:
    """The budgeted bound's figures: the smaller of its assignment gain and the unbudgeted bound's."""
    assert runs.budget_bound is not None
    gain = min(runs.budget_bound.gain, instant["served_gpu_minutes"] - static["served_gpu_minutes"])
    pending, served = static["pending_gpu_minutes"], static["served_gpu_minutes"] + gain
    beyond = pending - static["served_gpu_minutes"]
    figures: dict[str, Any] = {key: None for key in instant if key not in ("pools", "parameters")}
    figures.update(
        {
            "pending_gpu_minutes": round(pending, 1),
            "served_gpu_minutes": round(served, 1),
            "unmet_gpu_minutes": round(pending - served, 1),
            "lost_gpu_minutes": 0.0,
            "coverage": round(served / pending, 4) if pending > 0 else 1.0,
            "coverage_beyond_static": round(gain / beyond, 4) if beyond > 0 else 1.0,
            "eval_days": static["eval_days"],
            "assignment_gain_gpu_minutes": round(runs.budget_bound.gain, 1),
            "layers": runs.budget_bound.layers,
            "slots": runs.budget_bound.slots,
            "pools": {},
        }
    )
    return figures


def build_report(trace: Trace, config: BacktestConfig, runs: Runs, first: int, stop: int) -> dict[str, Any]:
    """One object per strategy plus `meta` (trace, evaluation window, model assumptions)."""
    results = runs.results
    static = results["static"]
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
            "wait_proxy": "p95/p99 of waiting GPUs over minutes with demand; ratio (p+node)/(p_static+node)",
        }
    }
    for name, res in results.items():
        figures = summarize(res, static)
        params: dict[str, Any] = {"model": config.model.as_dict()}
        if name in MOVING:
            params["planner"] = config.policy.as_dict()
        figures["parameters"] = params
        if name in BOUNDS:
            for key in list(figures):
                if key.startswith(("moves", "takeback", "reclaim", "reversals", "worst_pool", "displaced")):
                    figures[key] = None
        report[name] = figures
    if runs.budget_bound is not None:
        budgeted = _budget_bound_figures(runs, report["bound"], report["static"])
        budgeted["parameters"] = {"model": config.model.as_dict(), "planner": config.policy.as_dict()}
        report["budget_bound"] = budgeted
    if "policy" in report:
        report["policy"]["blocked_unmet_gpu_minutes"] = runs.blocked
    return report


def run_backtest(
    trace: Trace, config: BacktestConfig, first: int = 0, stop: int | None = None
) -> dict[str, Any]:
    """Run everything and return the report."""
    stop = trace.steps if stop is None else min(stop, trace.steps)
    return build_report(trace, config, run_strategies(trace, config, first, stop), first, stop)
