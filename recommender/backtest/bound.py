"""An upper bound on what any node-moving strategy serves at the policy's move budget.

The relaxation. A strategy's gain over static at minute t in pool T comes only from foreign nodes present
at T (a pool's served is `min(demand, capacity)`, concave in its capacity; lending its own nodes only
lowers it; preemption only subtracts). With x foreign nodes present, the gain is at most the sum of T's
first x **layers**: layer k is `min(node, max(0, demand - static capacity - node x (k - 1)))`. Layer k of
T can be served at t only if T has held k foreign nodes at once at some minute up to t; the first time it
does, a lend arrived (one node-move, decided at least `1 + drain` minutes earlier), and distinct layers
are first reached by distinct lends. So the strategy's gain is at most the value of a set of **layer
activations**: each (T, k) activated at most once, by a lend at step s, and worth layer k's GPU-minutes
from s + 1 + drain to the end of the scored window, as if it were never given back, never displaced a
donor, and never ran short of idle nodes.

The budget. The policy pays at least one token per lend from a bucket that starts empty and fills at
`moves_per_pool_day x pools` a day, so its j-th lend is decided no earlier than the step at which j
tokens have accrued (the bucket's one-day cap and the 2-token price of a lend from home only delay it
more). Choosing which layer each of these **slots** activates is an assignment problem; its optimum
(computed exactly, Hungarian method) bounds the gain of the policy, and of any strategy whose lends by
minute t never exceed the tokens accrued by t (the reference plan included). The bound reported is the
smaller of it and the unbudgeted per-minute bound (`instant_bound`), which holds as well.

Relaxed, so it bounds: donors' losses, node conflicts and availability, returns, the reversal rule and the
wait targets. It is loose where those bind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recommender.backtest.engine import Prepared

DAY_MIN = 1440.0


@dataclass(frozen=True)
class BudgetBound:
    """The assignment's gain (GPU-minutes over static in the scored window) and its size."""

    gain: float
    layers: int
    slots: int


def _layers(prepared: Prepared, g: int, first: int, stop: int) -> list[list[int]]:
    """Suffix sums of every layer of every pool: out[i][t] = layer i's GPU-minutes from t to stop."""
    trace = prepared.trace
    others = sum(prepared.home_nodes)
    out: list[list[int]] = []
    for p in range(len(trace.pools)):
        demand, capacity = prepared.demand[p], trace.capacity[p]
        short = [max(0, demand[t] - capacity[t]) if first <= t < stop else 0 for t in range(stop)]
        deepest = min(others - prepared.home_nodes[p], math.ceil(max(short, default=0) / g))
        for k in range(deepest):
            floor = g * k
            suffix, acc = [0] * (stop + 1), 0
            for t in range(stop - 1, -1, -1):
                x = short[t] - floor
                if x > 0:
                    acc += x if x < g else g
                suffix[t] = acc
            if acc > 0:
                out.append(suffix)
    return out


def slot_steps(pools: int, moves_per_pool_day: float, step_min: float, limit: int) -> list[int]:
    """Steps at which the 1st, 2nd, ... token has accrued (tokens start at 0), before `limit`."""
    rate = moves_per_pool_day * pools * step_min / DAY_MIN
    if rate <= 0:
        return []
    out: list[int] = []
    j = 1
    while True:
        step = math.ceil(j / rate - 1e-9)
        if step >= limit:
            return out
        out.append(step)
        j += 1


def max_assignment(weights: list[list[float]]) -> float:
    """The largest total weight of a matching of rows to columns (every weight >= 0; each row and column
    used at most once). Hungarian method with potentials, O(rows^2 x columns) on the smaller side."""
    if not weights or not weights[0]:
        return 0.0
    rows, cols = len(weights), len(weights[0])
    if rows > cols:
        weights = [list(col) for col in zip(*weights, strict=True)]
        rows, cols = cols, rows
    top = max(max(r) for r in weights)
    cost = [[top - w for w in r] for r in weights]  # minimise: every row is matched (rows <= columns)
    inf = float("inf")
    u, v = [0.0] * (rows + 1), [0.0] * (cols + 1)
    match = [0] * (cols + 1)  # column -> row (1-based), 0 free
    way = [0] * (cols + 1)
    for i in range(1, rows + 1):
        match[0] = i
        j0 = 0
        minv = [inf] * (cols + 1)
        used = [False] * (cols + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = match[j0], inf, 0
            row, ui0 = cost[i0 - 1], u[i0]
            for j in range(1, cols + 1):
                if not used[j]:
                    cur = row[j - 1] - ui0 - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(cols + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    return sum(weights[match[j] - 1][j - 1] for j in range(1, cols + 1) if match[j])


def budget_bound(
    prepared: Prepared,
    *,
    gpus_per_node: int,
    drain_steps: int,
    moves_per_pool_day: float,
    first: int = 0,
    stop: int | None = None,
) -> BudgetBound:
    """The assignment bound of the module docstring over the scored window [first, stop).
    `drain_steps`: steps between a lend's decision and the first step the node serves (1 + drain)."""
    trace = prepared.trace
    stop = trace.steps if stop is None else min(stop, trace.steps)
    layers = _layers(prepared, gpus_per_node, first, stop)
    slots = slot_steps(len(trace.pools), moves_per_pool_day, trace.step_min, stop - drain_steps)
    slots = slots[: len(layers)]  # a matching never needs a later slot than the n-th (values only fall)
    weights = [[float(suffix[s + drain_steps]) for s in slots] for suffix in layers]
    weights = [row for row in weights if row and row[0] > 0]
    return BudgetBound(max_assignment(weights) if weights else 0.0, len(weights), len(slots))
