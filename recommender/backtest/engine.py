"""Replay a trace through the capacity model under one strategy and collect the raw tallies.

Each step: nodes whose drain (or reclaim) delay has passed arrive; every pool serves `min(demand,
capacity)` of its demand (running + pending from the trace) and the rest waits; the strategy sees that
state and returns moves, which leave their source at once and arrive after the drain delay (a reclaim:
after the reclaim delay). A reclaim requeues the holder's jobs on the nodes it takes: the GPUs its
allocation no longer fits are preempted and lose `preempt_loss_min` minutes of work each. A drain kills
nothing. Only steps in the evaluation window [first, stop) are tallied; earlier steps still drive the
strategy's history (a warm-up).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from recommender.backtest.model import LEND, RECLAIM, TAKEBACK, CapacityModel, ModelParams, NodeMove
from recommender.backtest.trace import Trace

REVERSAL_WINDOW_MIN = 60.0


@dataclass
class Observation:
    """State at the current step, per pool (GPUs); lists are reused between steps."""

    capacity: list[int]
    allocated: list[int]
    unmet: list[int]
    demand: list[int]
    model: CapacityModel


class Strategy(Protocol):
    """Decides moves from the state at a step."""

    name: str

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """Moves to start now."""
        ...


@dataclass
class Prepared:
    """Per-trace arrays shared by every strategy run."""

    trace: Trace
    demand: list[list[int]]
    home_nodes: list[int]

    @classmethod
    def of(cls, trace: Trace, gpus_per_node: int) -> Prepared:
        """Demand series and movable home nodes per pool."""
        demand = [trace.demand(p) for p in range(len(trace.pools))]
        home = [min(c) // gpus_per_node if c else 0 for c in trace.capacity]
        return cls(trace, demand, home)


@dataclass
class RunResult:
    """Tallies over the evaluation window (GPU-minutes unless noted)."""

    name: str
    pools: tuple[str, ...]
    step_min: float
    eval_steps: int
    gpus_per_node: int
    home_gpus: list[int]
    pending: list[float] = field(default_factory=list)
    unmet: list[float] = field(default_factory=list)
    lost: list[float] = field(default_factory=list)
    allocated: list[float] = field(default_factory=list)
    capacity: list[float] = field(default_factory=list)
    trace_capacity: list[float] = field(default_factory=list)
    net_node_min: list[float] = field(default_factory=list)
    waits: list[list[int]] = field(default_factory=list)
    moves_in: list[int] = field(default_factory=list)
    moves_out: list[int] = field(default_factory=list)
    takebacks_in: list[int] = field(default_factory=list)
    reclaims_in: list[int] = field(default_factory=list)
    preempted: list[float] = field(default_factory=list)  # GPUs whose running work was preempted
    reversals: int = 0
    takebacks: int = 0  # nodes moved home, by drain or by reclaim
    reclaims: int = 0  # of those, nodes moved home by reclaim
    move_log: list[tuple[int, str, str, str, int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.pools)
        for name in (
            "pending",
            "unmet",
            "lost",
            "allocated",
            "capacity",
            "trace_capacity",
            "net_node_min",
            "preempted",
        ):
            setattr(self, name, [0.0] * n)
        self.waits = [[] for _ in range(n)]
        self.moves_in, self.moves_out = [0] * n, [0] * n
        self.takebacks_in, self.reclaims_in = [0] * n, [0] * n

    @property
    def moves(self) -> int:
        """Nodes moved in the window."""
        return sum(self.moves_out)

    @property
    def eval_days(self) -> float:
        """Length of the evaluation window in days."""
        return self.eval_steps * self.step_min / 1440.0


class _Reversals:
    """Counts nodes moved X->Y and then Y->X within the reversal window."""

    def __init__(self, window_steps: int) -> None:
        self.window = window_steps
        self.recent: dict[tuple[int, int], deque[list[int]]] = defaultdict(deque)

    def add(self, step: int, src: int, dst: int, nodes: int) -> int:
        back = self.recent[(dst, src)]
        while back and back[0][0] < step - self.window:
            back.popleft()
        matched = 0
        for entry in back:
            take = min(nodes - matched, entry[1])
            entry[1] -= take
            matched += take
            if matched == nodes:
                break
        self.recent[(src, dst)].append([step, nodes])
        return matched


def run(
    prepared: Prepared, strategy: Strategy, params: ModelParams, first: int = 0, stop: int | None = None
) -> RunResult:
    """Replay the whole trace; tally the steps in [first, stop)."""
    trace = prepared.trace
    n, steps, g, dt = len(trace.pools), trace.steps, params.gpus_per_node, trace.step_min
    stop = steps if stop is None else min(stop, steps)
    model = CapacityModel(prepared.home_nodes, params, dt)
    obs = Observation([0] * n, [0] * n, [0] * n, [0] * n, model)
    res = RunResult(
        strategy.name, trace.pools, dt, max(0, stop - first), g, [h * g for h in prepared.home_nodes]
    )
    reversals = _Reversals(round(REVERSAL_WINDOW_MIN / dt))
    cap_rows, dem_rows, pend_rows, delta = trace.capacity, prepared.demand, trace.pending, model.delta
    for t in range(steps):
        if model.transit:
            model.arrive(t)
        tally = first <= t < stop
        for p in range(n):
            trace_cap = cap_rows[p][t]
            k = trace_cap + g * delta[p]
            k = k if k > 0 else 0
            d = dem_rows[p][t]
            a = d if d < k else k
            obs.capacity[p], obs.allocated[p], obs.unmet[p], obs.demand[p] = k, a, d - a, d
            if tally:
                res.pending[p] += pend_rows[p][t] * dt
                res.unmet[p] += (d - a) * dt
                res.allocated[p] += a * dt
                res.capacity[p] += k * dt
                res.trace_capacity[p] += trace_cap * dt
                res.net_node_min[p] += delta[p] * dt
                if d > 0:
                    res.waits[p].append(d - a)
        moves = strategy.decide(t, obs)
        if moves:
            _apply(moves, t, tally=tally, obs=obs, res=res, reversals=reversals, params=params)
    return res


def _apply(
    moves: Sequence[NodeMove],
    step: int,
    *,
    tally: bool,
    obs: Observation,
    res: RunResult,
    reversals: _Reversals,
    params: ModelParams,
) -> None:
    drained: dict[int, int] = defaultdict(int)
    reclaimed: dict[int, int] = defaultdict(int)
    for move in moves:
        nodes = obs.model.apply(move, step)
        if nodes <= 0:
            continue
        reclaim = obs.model.reclaims(move)
        (reclaimed if reclaim else drained)[move.src] += nodes
        back = reversals.add(step, move.src, move.dst, nodes)
        if tally:
            res.moves_out[move.src] += nodes
            res.moves_in[move.dst] += nodes
            res.reversals += back
            if move.kind == TAKEBACK or reclaim:
                res.takebacks += nodes
                res.takebacks_in[move.dst] += nodes
            if reclaim:
                res.reclaims += nodes
                res.reclaims_in[move.dst] += nodes
            pools = res.pools
            kind = move.kind if reclaim or move.kind != RECLAIM else LEND  # a "reclaim" away from home drains
            res.move_log.append((step, pools[move.src], pools[move.dst], pools[move.home], nodes, kind))
    if not tally:
        return
    g = params.gpus_per_node
    for src, nodes in reclaimed.items():
        # the holder's running GPUs that no longer fit once every node it sent is gone; a node reclaimed
        # holds them before one drained (the drain lets its jobs end), at most a node's worth each
        left = obs.capacity[src] - g * (nodes + drained.get(src, 0))
        preempted = min(g * nodes, obs.allocated[src] - left)
        if preempted > 0:
            res.preempted[src] += preempted
            res.lost[src] += preempted * params.preempt_loss_min
