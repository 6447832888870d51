"""The hindsight `oracle`: a greedy that knows every pool's future demand, bound by the same model.

Moves take the same drain delay and preemption cost as the policy's. Each step, in order:
1. An owner whose demand at the arrival time (now + 1 + drain delay) exceeds its projected capacity gets
   its own nodes back: first from holders that will not need them within the lookahead, then spare nodes
   of any pool, then by preempting holders (repeated while a recall leaves another owner short).
2. A pool whose demand stays above its projected capacity for `min_use_min` after the arrival time gets
   nodes from pools that will not need them within `lookahead_min` (nodes owned by the borrower first,
   then borrowed ones, then the donor's own), the largest spare first.
No persistence window, no cooldown, no reserve: the future replaces them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from recommender.backtest.engine import Observation, Prepared
from recommender.backtest.model import CapacityModel, ModelParams, NodeMove
from recommender.backtest.strategies import window_steps
from recommender.backtest.windows import leading_max, leading_min


@dataclass(frozen=True)
class OracleParams:
    """Hindsight horizons in minutes."""

    lookahead_min: float = 180.0
    min_use_min: float = 60.0

    def as_dict(self) -> dict[str, float]:
        """Plain values for reports."""
        return dict(asdict(self))


class OracleStrategy:
    """Greedy with perfect knowledge of future demand."""

    name = "oracle"

    def __init__(self, prepared: Prepared, params: OracleParams, model_params: ModelParams) -> None:
        dt = prepared.trace.step_min
        self.g = model_params.gpus_per_node
        delay = math.ceil(model_params.drain_delay_min / dt - 1e-9)
        self.arrival = 1 + delay
        use = window_steps(params.min_use_min, dt)
        ahead = window_steps(params.lookahead_min, dt)
        demand = prepared.demand
        self.at_arrival = [leading_max(d, self.arrival, 1) for d in demand]
        self.sustained = [leading_min(d, self.arrival, use) for d in demand]
        self.future_peak = [leading_max(d, 1, ahead) for d in demand]

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """Take-backs due at the arrival time, then lends with a lasting benefit."""
        model, g = obs.model, self.g
        proj = (
            [k + g * model.incoming(p) for p, k in enumerate(obs.capacity)] if model.transit else obs.capacity
        )
        if not any(self.sustained[p][step] > k or self.at_arrival[p][step] > k for p, k in enumerate(proj)):
            return ()
        plan = _Plan(obs, self, step, list(proj))
        for _ in range(len(proj)):
            before = len(plan.moves)
            plan.owners()
            if len(plan.moves) == before:
                break
        plan.borrowers()
        return plan.moves


class _Plan:
    """One step's decisions with running tallies of projected capacity and nodes still movable."""

    def __init__(self, obs: Observation, oracle: OracleStrategy, step: int, proj: list[int]) -> None:
        model: CapacityModel = obs.model
        n = len(obs.capacity)
        self.g, self.step, self.oracle, self.obs, self.proj = oracle.g, step, oracle, obs, proj
        self.given = [0] * n
        self.nodes = [row[:] for row in model.held]  # nodes[home][at]: movable nodes by owner and place
        away = [sum(row) for row in model.held]
        for t in model.transit:
            away[t.home] += t.nodes
        for home in range(n):
            self.nodes[home][home] = model.home_nodes[home] - away[home]
        self.movable = model.movable_all()  # column sums of `nodes`, kept as nodes move
        self.moves: list[NodeMove] = []

    def spare(self, pool: int) -> int:
        """Nodes the pool can give without needing them within the lookahead, idle now."""
        g, obs = self.g, self.obs
        later = (self.proj[pool] - self.oracle.future_peak[pool][self.step]) // g
        now = (obs.capacity[pool] - obs.demand[pool]) // g - self.given[pool]
        return max(0, min(later, now, self.movable[pool]))

    def send(self, src: int, dst: int, count: int) -> int:
        """Move up to `count` nodes from src to dst: dst's own first, then borrowed, then src's own."""
        homes = [dst] + [h for h in range(len(self.proj)) if h not in (dst, src)] + [src]
        sent = 0
        for home in homes:
            take = min(count - sent, self.nodes[home][src])
            if take <= 0:
                continue
            self.nodes[home][src] -= take
            self.movable[src] -= take
            self.moves.append(NodeMove(src, dst, home, take, "takeback" if home == dst else "lend"))
            sent += take
            if sent == count:
                break
        self.proj[src] -= sent * self.g
        self.proj[dst] += sent * self.g
        self.given[src] += sent
        return sent

    def owners(self) -> None:
        """Owners whose demand at the arrival time exceeds their projected capacity."""
        n = len(self.proj)
        for owner in range(n):
            lent = [h for h in range(n) if h != owner and self.nodes[owner][h] > 0]
            if not lent:
                continue
            short = self.oracle.at_arrival[owner][self.step] - self.proj[owner]
            need = math.ceil(short / self.g) if short > 0 else 0
            for holder in sorted(lent, key=lambda h: -self.spare(h)):
                if need <= 0:
                    break
                free = min(self.spare(holder), self.nodes[owner][holder])
                need -= self._send_own(holder, owner, min(need, free))
            for donor in self._donors(owner):
                if need <= 0:
                    break
                need -= self.send(donor, owner, min(need, self.spare(donor)))
            for holder in lent:
                if need <= 0:
                    break
                need -= self._send_own(holder, owner, min(need, self.nodes[owner][holder]))

    def _send_own(self, holder: int, owner: int, count: int) -> int:
        take = min(count, self.nodes[owner][holder])
        if take <= 0:
            return 0
        self.nodes[owner][holder] -= take
        self.movable[holder] -= take
        self.moves.append(NodeMove(holder, owner, owner, take, "takeback"))
        self.proj[holder] -= take * self.g
        self.proj[owner] += take * self.g
        self.given[holder] += take
        return take

    def _donors(self, dst: int) -> list[int]:
        candidates = [(self.spare(q), q) for q in range(len(self.proj)) if q != dst]
        return [q for s, q in sorted(candidates, key=lambda x: (-x[0], x[1])) if s > 0]

    def borrowers(self) -> None:
        """Pools whose shortfall lasts at least min_use after the arrival time."""
        shortfalls = []
        for pool in range(len(self.proj)):
            short = self.oracle.sustained[pool][self.step] - self.proj[pool]
            if short > 0:
                shortfalls.append((short, pool))
        for short, pool in sorted(shortfalls, key=lambda x: (-x[0], x[1])):
            need = math.ceil(short / self.g)
            for donor in self._donors(pool):
                if need <= 0:
                    break
                need -= self.send(donor, pool, min(need, self.spare(donor)))
