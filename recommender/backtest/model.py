"""The capacity model: which pool holds each whole node, moves that take a drain delay or a reclaim's.

A pool's capacity at a step is its trace capacity plus `gpus_per_node` times the nodes it received minus
the nodes it sent. Only whole nodes present for the whole trace move (`floor(min capacity / node)` per
pool); a remainder smaller than a node stays pinned to its pool. Two kinds of move:

- a **drain** (every lend, and a take-back by drain): the node takes no new work, the jobs on it are left to
  end, and it serves its destination after the drain delay; nothing is killed, so no work is lost (the
  drain delay is the model's allowance for those jobs to end: optimistic for long jobs);
- a **reclaim** (a take-back only: the node goes home): the jobs on it are requeued at once, and it serves
  its owner after the reclaim delay; each GPU the holder was running on it loses `preempt_loss_min`
  minutes of work (the engine charges it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from recommender.backtest.errors import BacktestError


@dataclass(frozen=True)
class ModelParams:
    """Model assumptions; durations in minutes."""

    gpus_per_node: int = 8
    drain_delay_min: float = 10.0
    preempt_loss_min: float = 30.0
    reclaim_delay_min: float = 2.0

    def __post_init__(self) -> None:
        errors = []
        if self.gpus_per_node < 1:
            errors.append("gpus_per_node must be >= 1")
        if self.drain_delay_min < 0:
            errors.append("drain_delay_min must be >= 0")
        if self.preempt_loss_min < 0:
            errors.append("preempt_loss_min must be >= 0")
        if self.reclaim_delay_min < 0:
            errors.append("reclaim_delay_min must be >= 0")
        if errors:
            raise BacktestError("; ".join(errors))

    def as_dict(self) -> dict[str, float | int]:
        """Plain values for reports."""
        return dict(asdict(self))


LEND, TAKEBACK, RECLAIM = "lend", "takeback", "reclaim"


@dataclass(frozen=True, slots=True)
class NodeMove:
    """`nodes` nodes owned by pool `home` go from pool `src` to pool `dst` (pool indices). `kind`: `lend`,
    `takeback` (home by drain) or `reclaim` (home at once, the holder's jobs on them requeued)."""

    src: int
    dst: int
    home: int
    nodes: int
    kind: str


@dataclass(slots=True)
class Transit:
    """Nodes on their way; usable by `dst` from step `arrive` (out of service for the drain delay)."""

    arrive: int
    home: int
    src: int
    dst: int
    nodes: int


class CapacityModel:
    """Node ownership, holding and transit for every pool."""

    def __init__(self, home_nodes: list[int], params: ModelParams, step_min: float) -> None:
        n = len(home_nodes)
        self.params = params
        self.g = params.gpus_per_node
        self.home_nodes = list(home_nodes)
        self.delay_steps = math.ceil(params.drain_delay_min / step_min - 1e-9)
        self.reclaim_steps = math.ceil(params.reclaim_delay_min / step_min - 1e-9)
        self.delta = [0] * n
        self.held = [[0] * n for _ in range(n)]
        self.transit: list[Transit] = []
        self.version = 0  # bumped whenever a node leaves or arrives (callers cache by it)

    def capacity(self, pool: int, trace_capacity: int) -> int:
        """GPUs the pool can use now."""
        return max(0, trace_capacity + self.g * self.delta[pool])

    def at_home(self, pool: int) -> int:
        """The pool's own nodes that are at home (not lent, not on their way)."""
        away = sum(self.held[pool]) + sum(t.nodes for t in self.transit if t.home == pool)
        return self.home_nodes[pool] - away

    def movable(self, pool: int) -> int:
        """Whole nodes the pool holds and could send: its own at home plus borrowed ones."""
        return self.at_home(pool) + sum(row[pool] for row in self.held)

    def movable_all(self) -> list[int]:
        """`movable` for every pool at once."""
        away = [sum(row) for row in self.held]
        for t in self.transit:
            away[t.home] += t.nodes
        borrowed = [sum(col) for col in zip(*self.held, strict=True)]
        return [h - a + b for h, a, b in zip(self.home_nodes, away, borrowed, strict=True)]

    def incoming(self, pool: int) -> int:
        """Nodes on their way to the pool."""
        return sum(t.nodes for t in self.transit if t.dst == pool)

    def arrive(self, step: int) -> None:
        """Deliver the nodes whose drain delay has passed."""
        still: list[Transit] = []
        for t in self.transit:
            if t.arrive > step:
                still.append(t)
                continue
            self.version += 1
            self.delta[t.dst] += t.nodes
            if t.home != t.dst:
                self.held[t.home][t.dst] += t.nodes
        self.transit = still

    @staticmethod
    def reclaims(move: NodeMove) -> bool:
        """Whether the move is a reclaim: only a move home can be (anything else drains)."""
        return move.kind == RECLAIM and move.dst == move.home

    def apply(self, move: NodeMove, step: int) -> int:
        """Send nodes now (clipped to what the source holds); return the number actually sent. They arrive
        after the reclaim delay for a reclaim, else after the drain delay."""
        if move.src == move.dst or move.nodes <= 0:
            return 0
        have = self.at_home(move.src) if move.home == move.src else self.held[move.home][move.src]
        nodes = min(move.nodes, have)
        if nodes <= 0:
            return 0
        self.version += 1
        if move.home != move.src:
            self.held[move.home][move.src] -= nodes
        self.delta[move.src] -= nodes
        delay = self.reclaim_steps if self.reclaims(move) else self.delay_steps
        self.transit.append(Transit(step + 1 + delay, move.home, move.src, move.dst, nodes))
        return nodes

    def nodes_in_transit(self) -> int:
        """Nodes between pools."""
        return sum(t.nodes for t in self.transit)
