"""Turn run tallies into the reported figures (per strategy, per pool), relative to the static run.

Definitions (all over the evaluation window):
- pending_gpu_minutes: the trace's pending GPUs summed over time (the same for every strategy).
- served_gpu_minutes: pending minus the GPU-minutes that still wait in the model, minus work lost to
  preemption; `coverage` = served / pending (1.0 when nothing was pending).
- allocation_utilization: allocated GPU-minutes over the cluster's GPU-minutes (nodes in transit count as
  capacity that serves nobody).
- moves: nodes moved; moves_per_pool_day = moves / (pools x days).
- reversals_within_60min: nodes moved X->Y and back Y->X within 60 minutes; also scaled to 30 days.
- wait proxy: a pool's waiting GPUs at each minute in which it has demand (running + pending > 0);
  p95 per pool; ratio = (p95 + node) / (p95 under static + node), so a pool that never waits under static
  (a lender) still counts; worst_pool_p95_wait_ratio_vs_static is the largest ratio over all pools.
- the same ratio at p99 is reported too (a tail that p95 hides).
- displaced_gpu_minutes: minute by minute, waiting beyond what the same pool waited under static.
- coverage_beyond_static (the headline): (served - served under static) / (pending - served under
  static): the share of the pending that the pool's own idle GPUs could not serve. `coverage` counts the
  pending that a pool's own idle GPUs could have served (fragmentation, limits) as served for every
  strategy, static included.
- preempted_gpus / lost_gpu_minutes: running GPUs displaced (by a reclaim, or by an owner's reclaim
  under scheduler-native borrowing) and the work they lost; a drain kills nothing.
- takeback_moves / reclaim_moves: nodes moved home, and of those the ones moved home by reclaim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recommender.backtest.engine import RunResult
from recommender.quantiles import nearest_rank


def percentile(values: Sequence[int], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    return float(nearest_rank(values, q)) if values else 0.0


def _ratio(part: float, whole: float, empty: float = 1.0) -> float:
    return part / whole if whole > 0 else empty


def _pool_figures(res: RunResult, static: RunResult, p: int) -> dict[str, Any]:
    g = res.gpus_per_node
    served = res.pending[p] - res.unmet[p] - res.lost[p]
    p95 = percentile(res.waits[p], 0.95)
    p95_static = percentile(static.waits[p], 0.95)
    p99, p99_static = percentile(res.waits[p], 0.99), percentile(static.waits[p], 0.99)
    displaced = sum(max(0, a - b) for a, b in zip(res.waits[p], static.waits[p], strict=True))
    return {
        "home_gpus": res.home_gpus[p],
        "pending_gpu_minutes": round(res.pending[p], 1),
        "served_gpu_minutes": round(served, 1),
        "unmet_gpu_minutes": round(res.unmet[p], 1),
        "lost_gpu_minutes": round(res.lost[p], 1),
        "coverage": round(_ratio(served, res.pending[p]), 4),
        "allocation_utilization": round(_ratio(res.allocated[p], res.capacity[p], 0.0), 4),
        "mean_capacity_gpus": round(_ratio(res.capacity[p], res.eval_steps * res.step_min, 0.0), 2),
        "mean_net_nodes": round(_ratio(res.net_node_min[p], res.eval_steps * res.step_min, 0.0), 3),
        "moves_in": res.moves_in[p],
        "moves_out": res.moves_out[p],
        "takebacks_in": res.takebacks_in[p],
        "reclaims_in": res.reclaims_in[p],
        "preempted_gpus": round(res.preempted[p], 1),
        "wait_minutes": sum(1 for w in res.waits[p] if w > 0) * res.step_min,
        "p95_wait_gpus": p95,
        "p95_wait_gpus_static": p95_static,
        "p95_wait_ratio_vs_static": round((p95 + g) / (p95_static + g), 4),
        "p99_wait_ratio_vs_static": round((p99 + g) / (p99_static + g), 4),
        "displaced_gpu_minutes": round(displaced * res.step_min, 1),
    }


def summarize(res: RunResult, static: RunResult) -> dict[str, Any]:
    """The strategy's figures, its per-pool breakdown included."""
    pools = {name: _pool_figures(res, static, p) for p, name in enumerate(res.pools)}
    pending, unmet, lost = sum(res.pending), sum(res.unmet), sum(res.lost)
    served = pending - unmet - lost
    static_served = sum(static.pending) - sum(static.unmet) - sum(static.lost)
    days = res.eval_days
    ranked = sorted(
        pools, key=lambda n: (-pools[n]["p95_wait_ratio_vs_static"], -pools[n]["displaced_gpu_minutes"], n)
    )
    worst = ranked[0] if ranked else ""
    return {
        "pending_gpu_minutes": round(pending, 1),
        "served_gpu_minutes": round(served, 1),
        "unmet_gpu_minutes": round(unmet, 1),
        "lost_gpu_minutes": round(lost, 1),
        "preempted_gpus": round(sum(res.preempted), 1),
        "coverage": round(_ratio(served, pending), 4),
        "coverage_beyond_static": round(_ratio(served - static_served, pending - static_served), 4),
        "allocation_utilization": round(_ratio(sum(res.allocated), sum(res.trace_capacity), 0.0), 4),
        "moves": res.moves,
        "takeback_moves": res.takebacks,
        "reclaim_moves": res.reclaims,
        "moves_per_pool_day": round(_ratio(res.moves, len(res.pools) * days, 0.0), 4),
        "reversals_within_60min": res.reversals,
        "reversals_within_60min_per_30_days": round(_ratio(res.reversals * 30.0, days, 0.0), 3),
        "worst_pool_p95_wait_ratio_vs_static": pools[worst]["p95_wait_ratio_vs_static"] if worst else 1.0,
        "worst_pool": worst,
        "worst_pool_p99_wait_ratio_vs_static": max(
            (f["p99_wait_ratio_vs_static"] for f in pools.values()), default=1.0
        ),
        "displaced_gpu_minutes": round(sum(f["displaced_gpu_minutes"] for f in pools.values()), 1),
        "eval_days": round(days, 4),
        "pools": pools,
    }
