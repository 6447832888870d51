"""Two strategies beside the policy: the planner with hindsight (a diagnostic) and the unbudgeted `bound`.

- `hindsight` (`HindsightStrategy`): the policy's own planner, budget, reversal rule and take-back rule,
  with each pool's outlook read from the trace's future instead of its past: a taker's use is what one more
  node above its level would really serve over the loan (at most a day ahead), a donor's idle span is the
  time until its demand next needs the node (foreseen, no rise risked, never sparse), and an owner recalls
  a node when its demand will exceed its capacity before the node could arrive. It runs through the same
  engine and metrics. A diagnostic, not a ceiling: policy vs hindsight is what forecasting costs this
  planner; the budgeted ceiling is the reference plan (`recommender/backtest/reference.py`).
- `bound` (`instant_bound`): an upper bound on what *any* node-moving strategy can serve in this model,
  whatever its move budget. Each minute, the movable nodes are given to pools as if moves were free and
  instant: a pool's pinned GPUs serve it first, then whole nodes go where they serve the most (a node
  fills up to 8 waiting GPUs, so full nodes go first, then the largest remainders). Every strategy's
  allocation at that minute is one such assignment (fewer nodes when some are in transit), so it serves at
  most that; preemption losses only lower it. It ignores moves, drain delays and waits.
"""

from __future__ import annotations

from collections.abc import Sequence

from recommender.backtest.engine import Observation, Prepared, RunResult
from recommender.backtest.model import ModelParams
from recommender.backtest.strategies import PolicyStrategy, window_steps
from recommender.policies.outlook import Outlook
from recommender.policies.rebalance import RebalanceParams

BLOCK = 32
HORIZON_MIN = 1440.0


class FutureOutlook:
    """A pool's outlook read from its future demand (the `Outlook` protocol); `now` is set per step."""

    __slots__ = ("blocks", "demand", "drain", "gap", "history", "horizon", "lows", "now", "soon")

    def __init__(self, demand: Sequence[int], *, drain: int, gap: int, horizon: int, history: int) -> None:
        self.demand = list(demand)
        self.drain, self.gap, self.horizon, self.history = drain, gap, horizon, history
        n = len(self.demand)
        self.blocks = [max(self.demand[i : i + BLOCK]) for i in range(0, n, BLOCK)]
        self.lows = [min(self.demand[i : i + BLOCK]) for i in range(0, n, BLOCK)]
        # soon[t]: the largest demand over (t, t + drain]: what a recall made now would arrive too late for
        self.soon = [max(self.demand[t + 1 : t + drain + 1], default=0) for t in range(n)]
        self.now = 0

    def use(self, level: int, width: int, horizon_min: float) -> float:
        """What one more node above `level` would serve from its arrival to the end of the loan (at most
        the horizon of a day), per step of the loan."""
        d, n = self.demand, len(self.demand)
        start = self.now + self.drain
        end = min(n, self.now + min(self.horizon, max(1, round(horizon_min))))
        served, t = 0, start
        top = level + width
        while t < end:
            if t % BLOCK == 0 and t + BLOCK <= end:
                b = t // BLOCK
                if self.blocks[b] <= level:
                    t += BLOCK
                    continue
                if self.lows[b] >= top:
                    served += width * BLOCK
                    t += BLOCK
                    continue
            v = d[t]
            if v > level:
                served += min(width, v - level)
            t += 1
        length = end - start
        return served / length if length > 0 else 0.0

    def idle(self, level: int) -> tuple[float, int | None]:
        """Steps until the demand next exceeds `level` (at most `history`): foreseen, never missed."""
        d, n = self.demand, len(self.demand)
        t, end = self.now + 1, min(n, self.now + 1 + self.history)
        while t < end:
            if t % BLOCK == 0 and self.blocks[t // BLOCK] <= level:
                t += BLOCK
                continue
            if d[t] > level:
                return float(t - self.now), 0
            t += 1
        return float(end - self.now), 0

    def rises(self, level: int, horizon_min: float) -> tuple[int, int, float]:
        """Hindsight's idle spans are exact: no rise is risked."""
        return 0, 1 << 30, float(self.history)

    def demand_soon(self) -> int:
        """The largest demand before a node recalled now could arrive."""
        return self.soon[self.now]

    def recent_weight(self) -> float | None:
        """Hindsight's use is the future's: nothing is blended."""
        return None

    def busy_minutes(self) -> int:
        """Hindsight needs no wait allowance: its idle spans are exact (never sparse)."""
        return 1 << 30

    @property
    def watched_min(self) -> float:
        """As much as its demand minutes: never sparse."""
        return float(1 << 30)


class HindsightStrategy(PolicyStrategy):
    """The planner with future outlooks: same budget, same reversal and take-back rules."""

    name = "hindsight"

    def _outlooks(self, prepared: Prepared, model_params: ModelParams) -> list[Outlook]:
        p, dt = self.params, self.dt
        drain = window_steps(p.drain_min, dt)
        self.future = [
            FutureOutlook(
                series,
                drain=drain,
                gap=window_steps(p.gap_min(), dt),
                horizon=window_steps(HORIZON_MIN, dt),
                history=window_steps(p.history_min, dt),
            )
            for series in prepared.demand
        ]
        return list(self.future)

    def _observe(self, step: int, obs: Observation) -> None:
        for outlook in self.future:
            outlook.now = step


def hindsight(prepared: Prepared, params: RebalanceParams, model_params: ModelParams) -> HindsightStrategy:
    """The planner with hindsight for a trace (a diagnostic)."""
    return HindsightStrategy(prepared, params, model_params)


def instant_bound(
    prepared: Prepared, params: ModelParams, first: int = 0, stop: int | None = None
) -> RunResult:
    """The unbudgeted bound's tallies over [first, stop): each minute the best assignment of the movable
    nodes, free and instant (see the module docstring). Per pool it records the assignment's waiting."""
    trace = prepared.trace
    n, g, dt = len(trace.pools), params.gpus_per_node, trace.step_min
    stop = trace.steps if stop is None else min(stop, trace.steps)
    res = RunResult("bound", trace.pools, dt, max(0, stop - first), g, [h * g for h in prepared.home_nodes])
    nodes = sum(prepared.home_nodes)
    for t in range(first, stop):
        pinned = [trace.capacity[p][t] - g * prepared.home_nodes[p] for p in range(n)]
        need = [max(0, prepared.demand[p][t] - pinned[p]) for p in range(n)]
        full = [x // g for x in need]
        given = list(full)
        left = nodes - sum(full)
        if left < 0:  # more whole nodes wanted than exist: fill the largest needs first (all worth g)
            given = [0] * n
            left = nodes
            for p in sorted(range(n), key=lambda q: -full[q]):
                take = min(full[p], left)
                given[p], left = take, left - take
        else:
            for p in sorted(range(n), key=lambda q: -(need[q] % g)):
                if left <= 0:
                    break
                if need[p] % g:
                    given[p] += 1
                    left -= 1
        for p in range(n):
            d = prepared.demand[p][t]
            cap = pinned[p] + g * given[p]
            a = min(d, cap)
            res.pending[p] += trace.pending[p][t] * dt
            res.unmet[p] += (d - a) * dt
            res.allocated[p] += a * dt
            res.capacity[p] += cap * dt
            res.trace_capacity[p] += trace.capacity[p][t] * dt
            if d > 0:
                res.waits[p].append(d - a)
    return res
