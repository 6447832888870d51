"""The baseline an operator would pick instead of moving nodes: scheduler-native borrowing with reclaim.

Kueue cohorts with borrowing (no borrowing or lending limit), or Slurm overlapping partitions with
partition-priority preemption: any pool's pending work runs on idle GPUs of any other pool, and the owner
takes them back the minute its own demand needs them, preempting the borrower. In this model, each
minute:

1. every pool serves its own demand from its own GPUs first (`min(demand, capacity)`: owners have
   priority, so no owner ever waits more than under static);
2. borrowed work still wanted keeps running on other pools' idle GPUs while there are enough; when the
   owners' demand leaves fewer idle GPUs than that, the excess is **preempted**: each preempted GPU loses
   `preempt_loss_min` minutes of work (charged to the borrower, as a take-back that displaces running
   work is charged to node moves), and the preempted demand waits like any other;
3. the remaining idle GPUs go to the remaining waiting demand, the largest first.

GPUs are fungible across the cluster here (no drain, no whole-node granularity, no job shapes): that
flatters the baseline on coverage; its cost is the preempted work.
"""

from __future__ import annotations

from recommender.backtest.engine import Prepared, RunResult
from recommender.backtest.model import ModelParams


def run_sharing(
    prepared: Prepared, params: ModelParams, first: int = 0, stop: int | None = None
) -> RunResult:
    """Replay the trace under scheduler-native borrowing; tally [first, stop)."""
    trace = prepared.trace
    n, g, dt = len(trace.pools), params.gpus_per_node, trace.step_min
    stop = trace.steps if stop is None else min(stop, trace.steps)
    res = RunResult("sharing", trace.pools, dt, max(0, stop - first), g, [h * g for h in prepared.home_nodes])
    borrowed = [0] * n
    for t in range(stop):
        caps = [trace.capacity[p][t] for p in range(n)]
        demand = [prepared.demand[p][t] for p in range(n)]
        own = [min(d, k) for d, k in zip(demand, caps, strict=True)]
        supply = sum(k - o for k, o in zip(caps, own, strict=True))
        want = [d - o for d, o in zip(demand, own, strict=True)]
        keep = [min(b, w) for b, w in zip(borrowed, want, strict=True)]
        excess = sum(keep) - supply
        preempted = [0] * n
        if excess > 0:  # owners reclaim: preempt borrowed work, the largest borrowers first
            for p in sorted(range(n), key=lambda q: -keep[q]):
                cut = min(keep[p], excess)
                keep[p] -= cut
                preempted[p] = cut
                excess -= cut
                if excess <= 0:
                    break
        left = supply - sum(keep)
        for p in sorted(range(n), key=lambda q: -(want[q] - keep[q])):
            if left <= 0:
                break
            extra = min(want[p] - keep[p], left)
            keep[p] += extra
            left -= extra
        borrowed = keep
        if not first <= t < stop:
            continue
        for p in range(n):
            a = own[p] + keep[p]
            res.pending[p] += trace.pending[p][t] * dt
            res.unmet[p] += (demand[p] - a) * dt
            res.allocated[p] += a * dt
            res.capacity[p] += caps[p] * dt
            res.trace_capacity[p] += caps[p] * dt
            res.preempted[p] += preempted[p]
            res.lost[p] += preempted[p] * params.preempt_loss_min
            if demand[p] > 0:
                res.waits[p].append(demand[p] - a)
    return res
