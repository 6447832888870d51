"""The `static`, `policy` and `hindsight` strategies.

`policy` feeds the planner (`recommender/policies/rebalance.py`) what a live recommender would read: each
pool's trailing demand (`DemandHistory`), where nodes are, and the moves made so far. `hindsight` runs the
same planner, with the same budget, reversal rule and donor protection, but each pool's outlook reads the
future instead of the past (`recommender/backtest/hindsight.py`): the difference between the two is what
forecasting costs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from recommender.backtest.engine import Observation, Prepared
from recommender.backtest.model import CapacityModel, ModelParams, NodeMove
from recommender.policies.outlook import DemandHistory, Outlook
from recommender.policies.rebalance import (
    ClusterView,
    Loan,
    MoveRecord,
    PoolSnapshot,
    RebalanceParams,
    RebalancePolicy,
)

BETWEEN_CYCLES = "between planning cycles"
IN_TRANSIT = "nodes in transit"
OWNER_WAITS = "owner waits for its own nodes"


class StaticStrategy:
    """Every pool keeps its own nodes."""

    name = "static"

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """Never moves anything."""
        return ()


def window_steps(minutes: float, step_min: float) -> int:
    """Steps covering `minutes` (at least one)."""
    return max(1, math.ceil(minutes / step_min - 1e-9))


class PolicyStrategy:
    """The planner, fed minute by minute with the model's state and each pool's trailing demand."""

    name = "policy"

    def __init__(
        self, prepared: Prepared, params: RebalanceParams, model_params: ModelParams, *, profile: bool = True
    ) -> None:
        trace = prepared.trace
        self.names = trace.pools
        self.index = {name: i for i, name in enumerate(self.names)}
        self.g = model_params.gpus_per_node
        self.dt = trace.step_min
        self.capacity = trace.capacity
        self.params = params
        self.profile = profile
        self.policy = RebalancePolicy(params)
        self.cycle = window_steps(params.cycle_min, self.dt)
        self.outlooks = self._outlooks(prepared, model_params)
        self.moves: list[MoveRecord] = []
        # unmet GPU-minutes that coexisted with idle whole nodes in other pools, by what blocked them
        self.blocked: dict[str, float] = defaultdict(float)
        self.first: int = 0
        self.stop: int | None = None
        self._placed: tuple[int, tuple[Loan, ...], list[int]] | None = None

    def _outlooks(self, prepared: Prepared, model_params: ModelParams) -> list[Outlook]:
        p = self.params
        self.histories = [
            DemandHistory(p.history_min, p.reversal_min, p.gap_min(), profile=self.profile)
            for _ in self.names
        ]
        return list(self.histories)

    def _observe(self, step: int, obs: Observation) -> None:
        now = step * self.dt
        for history, demand in zip(self.histories, obs.demand, strict=True):
            history.push(now, demand)

    def _placement(self, model: CapacityModel) -> tuple[tuple[Loan, ...], list[int]]:
        """Loans and movable nodes per pool, recomputed only after a node left or arrived."""
        if self._placed is None or self._placed[0] != model.version:
            names = self.names
            loans = [
                Loan(names[home], names[holder], nodes)
                for home, row in enumerate(model.held)
                for holder, nodes in enumerate(row)
                if nodes > 0
            ]
            loans.extend(Loan(names[t.home], names[t.dst], t.nodes, in_transit=True) for t in model.transit)
            self._placed = (model.version, tuple(loans), model.movable_all())
        return self._placed[1], self._placed[2]

    def view(self, step: int, obs: Observation, *, plan: bool) -> ClusterView:
        """The ClusterView at a step."""
        g = self.g
        loans, movable = self._placement(obs.model)
        pools = tuple(
            PoolSnapshot(
                name=name,
                home_gpus=self.capacity[p][step],
                capacity_gpus=obs.capacity[p],
                allocated_gpus=obs.allocated[p],
                pending_gpus=obs.unmet[p],
                idle_nodes=min((obs.capacity[p] - obs.allocated[p]) // g, movable[p]),
                outlook=self.outlooks[p],
            )
            for p, name in enumerate(self.names)
        )
        return ClusterView(step * self.dt, g, pools, loans, tuple(self.moves), 0.0, None, plan)

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """Ask the planner (lends every cycle, take-backs every step); remember the moves."""
        self._observe(step, obs)
        plan = step % self.cycle == 0
        lent_out = any(obs.model.held[p][q] for p in range(len(self.names)) for q in range(len(self.names)))
        waiting = any(obs.unmet)
        out: list[NodeMove] = []
        if (plan and waiting) or lent_out:
            view = self.view(step, obs, plan=plan and waiting)
            idx = self.index
            for move in self.policy.propose(view):
                self.moves.append(
                    MoveRecord(view.now_min, move.from_pool, move.to_pool, move.home_pool, move.nodes)
                )
                out.append(
                    NodeMove(
                        idx[move.from_pool], idx[move.to_pool], idx[move.home_pool], move.nodes, move.kind
                    )
                )
            if plan and not waiting:
                self.policy.blocked = {}
        elif plan:
            self.policy.blocked = {}
        if self.first <= step < (self.stop if self.stop is not None else step + 1) and waiting:
            self._tally_blocked(obs, out)
        return out

    def _tally_blocked(self, obs: Observation, out: Sequence[NodeMove]) -> None:
        """Unmet GPU-minutes of pools that waited while another pool had an idle whole node, by cause."""
        g, model = self.g, obs.model
        _, movable = self._placement(model)
        idle = [min((k - a) // g, m) for k, a, m in zip(obs.capacity, obs.allocated, movable, strict=True)]
        total = sum(i for i in idle if i > 0)
        helped = {m.dst for m in out}
        for p, unmet in enumerate(obs.unmet):
            if unmet <= 0 or total - max(0, idle[p]) <= 0 or p in helped:
                continue
            name = self.names[p]
            if any(model.held[p][q] for q in range(len(self.names))) or any(
                t.home == p for t in model.transit
            ):
                cause = OWNER_WAITS
            elif model.incoming(p) > 0:
                cause = IN_TRANSIT
            else:
                cause = self.policy.blocked.get(name, BETWEEN_CYCLES)
            self.blocked[cause] += unmet * self.dt
