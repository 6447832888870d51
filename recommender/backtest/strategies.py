"""The `static` and `policy` strategies: the policy sees only the model's past, through trailing windows."""

from __future__ import annotations

import math
from collections.abc import Sequence

from recommender.backtest.engine import Observation, Prepared
from recommender.backtest.model import CapacityModel, ModelParams, NodeMove
from recommender.backtest.windows import SlidingMin, SlidingQuantile, trailing_max
from recommender.policies.daily_profile import DailyProfile
from recommender.policies.rebalance import (
    LEND,
    ClusterView,
    Loan,
    PoolSnapshot,
    RebalanceParams,
    RebalancePolicy,
)


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
    """Feeds the rebalancing policy the signals a live recommender would read, minute by minute."""

    name = "policy"

    def __init__(self, prepared: Prepared, params: RebalanceParams, model_params: ModelParams) -> None:
        trace = prepared.trace
        self.names = trace.pools
        self.index = {name: i for i, name in enumerate(self.names)}
        self.g = model_params.gpus_per_node
        self.dt = trace.step_min
        self.capacity = trace.capacity
        self.policy = RebalancePolicy(params)
        reserve = window_steps(params.reserve_window_min, self.dt)
        self.peak = [trailing_max(series, reserve) for series in prepared.demand]
        recent = window_steps(params.plan_recent_peak_min, self.dt)
        self.recent_peak = [trailing_max(series, recent) for series in prepared.demand]
        persistence = window_steps(params.persistence_min, self.dt)
        q = params.persistence_quantile
        lasting = (lambda: SlidingQuantile(persistence, q)) if q else (lambda: SlidingMin(persistence))
        self.pending_lasting = [lasting() for _ in self.names]
        takeback = window_steps(params.takeback_persistence_min, self.dt)
        self.pending_recent_min = [SlidingMin(takeback) for _ in self.names]
        settled = window_steps(params.settled_takeback_min, self.dt)
        self.pending_settled_min = [SlidingMin(settled) for _ in self.names]
        quiet = window_steps(params.takeback_quiet_min, self.dt) if params.takeback_quiet_min else 0
        self.demand_quiet_min = [SlidingMin(quiet) if quiet else None for _ in self.names]
        chronic = window_steps(params.chronic_pending_min, self.dt) if params.chronic_pending_min else 0
        self.pending_chronic_min = [SlidingMin(chronic) if chronic else None for _ in self.names]
        self.last_lend: dict[str, float] = {}
        self.recent_lends: list[tuple[float, int]] = []
        self.recent_takebacks: list[tuple[float, int]] = []
        self.budget_window = max(params.lend_budget_window_min, params.move_budget_window_min)
        profile = params.profile_params()
        self.profile = DailyProfile(profile) if profile else None
        self.plan_lead = params.plan_lead_min
        self.epoch_min = trace.start.timestamp() / 60.0
        self._placed: tuple[int, tuple[Loan, ...], list[int]] | None = None  # (model version, loans, movable)

    def _placement(self, model: CapacityModel) -> tuple[tuple[Loan, ...], list[int]]:
        """Loans and movable nodes per pool, recomputed only after a node left or arrived."""
        if self._placed is None or self._placed[0] != model.version:
            self._placed = (model.version, self._loans(model), model.movable_all())
        return self._placed[1], self._placed[2]

    def _loans(self, model: CapacityModel) -> tuple[Loan, ...]:
        names = self.names
        loans = [
            Loan(names[home], names[holder], nodes)
            for home, row in enumerate(model.held)
            for holder, nodes in enumerate(row)
            if nodes > 0
        ]
        loans.extend(Loan(names[t.home], names[t.dst], t.nodes, in_transit=True) for t in model.transit)
        return tuple(loans)

    def view(self, step: int, obs: Observation) -> ClusterView:
        """The ClusterView at a step (updates the trailing windows; call once per step)."""
        model, g, names = obs.model, self.g, self.names
        loans, movable = self._placement(model)
        snapshots = []
        clock = self.epoch_min + step * self.dt
        for p, name in enumerate(names):
            unmet = obs.unmet[p]
            k, a = obs.capacity[p], obs.allocated[p]
            forecast, near, chronic = None, None, self.pending_chronic_min[p]
            quiet = self.demand_quiet_min[p]
            if self.profile is not None:
                self.profile.record(name, clock, obs.demand[p])
                forecast = self.profile.forecast(name, clock + self.plan_lead)
                near = self.profile.forecast(name, clock)
            snapshots.append(
                PoolSnapshot(
                    name=name,
                    home_gpus=self.capacity[p][step],
                    capacity_gpus=k,
                    allocated_gpus=a,
                    pending_gpus=unmet,
                    idle_nodes=min((k - a) // g, movable[p]),
                    pending_lasting_gpus=self.pending_lasting[p].push(unmet),
                    demand_peak_gpus=self.peak[p][step],
                    history_min=(step + 1) * self.dt,
                    pending_recent_min_gpus=self.pending_recent_min[p].push(unmet),
                    pending_settled_min_gpus=self.pending_settled_min[p].push(unmet),
                    pending_chronic_min_gpus=chronic.push(unmet) if chronic else None,
                    demand_recent_peak_gpus=self.recent_peak[p][step],
                    planned_demand_gpus=forecast.expected_demand if forecast else None,
                    planned_peak_gpus=forecast.expected_peak if forecast else None,
                    likely_peak_gpus=near.likely_peak if near else None,
                    demand_quiet_min_gpus=quiet.push(obs.demand[p]) if quiet else None,
                )
            )
        now = step * self.dt
        for recent in (self.recent_lends, self.recent_takebacks):
            while recent and now - recent[0][0] >= self.budget_window:
                recent.pop(0)
        return ClusterView(
            now,
            g,
            tuple(snapshots),
            loans,
            self.last_lend,
            tuple(self.recent_lends),
            tuple(self.recent_takebacks),
        )

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """Ask the policy; remember lends for the cooldown."""
        view = self.view(step, obs)
        out = []
        for move in self.policy.propose(view):
            if move.kind == LEND:
                self.last_lend[move.from_pool] = self.last_lend[move.to_pool] = view.now_min
                self.recent_lends.append((view.now_min, move.nodes))
            else:
                self.last_lend[move.to_pool] = view.now_min
                self.recent_takebacks.append((view.now_min, move.nodes))
            idx = self.index
            out.append(
                NodeMove(idx[move.from_pool], idx[move.to_pool], idx[move.home_pool], move.nodes, move.kind)
            )
        return out
