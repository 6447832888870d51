"""Per-pool history kept across cycles, and the rebalance planner's `ClusterView` built from Signals.

Each pool's demand samples (allocated + pending, as the scheduler exporter reports them) feed a
`DemandHistory` (`policies/outlook.py`), the same trailing outlook the backtest's policy reads, so the live
planner forecasts from the same aggregates: a taker's use of one more node at the loan's scale, how long a
donor's node has been idle, how often its demand rose above the level it keeps, and the time-of-day profile.
Loans, home partitions and the moves made (the budget replays them; the reversal rule reads the recent
ones) come from the proposal store (`signals/placement.py`); a caller without a store falls back to the
lends this process proposed.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from recommender.policies.outlook import DemandHistory
from recommender.policies.rebalance import (
    ClusterView,
    MoveRecord,
    PoolSnapshot,
    RebalanceParams,
    RebalancePolicy,
)
from recommender.signals.model import Signals
from recommender.signals.placement import Lend, Placement

IDLE = "idle"


class PoolHistory:
    """(time, pending, demand) per pool, and lends this process proposed, trimmed to the longest window."""

    def __init__(self, keep_seconds: float = 8 * 86400.0) -> None:
        self.keep = keep_seconds
        self.samples: dict[str, deque[tuple[float, int, int]]] = {}
        self.lends: list[Lend] = []
        self.started: float | None = None
        self._outlooks: _FedOutlooks | None = None

    def outlook(self, pool: str, params: RebalanceParams) -> DemandHistory:
        """The pool's trailing demand outlook, fed with the samples it has not seen yet (rebuilt from the
        kept samples when the parameters change, e.g. after a restart)."""
        key = (params.history_min, params.reversal_min, params.gap_min())
        if self._outlooks is None or self._outlooks.key != key:
            self._outlooks = _FedOutlooks(key, {}, {})
        fed = self._outlooks
        out = fed.histories.get(pool)
        if out is None:
            out = fed.histories[pool] = DemandHistory(*key)
        since = fed.until.get(pool, float("-inf"))
        fresh = []
        for sample in reversed(self.samples.get(pool, ())):
            if sample[0] <= since:
                break
            fresh.append(sample)
        for t, _, demand in reversed(fresh):
            out.push(t / 60.0, demand)
        if fresh:
            fed.until[pool] = fresh[0][0]
        return out

    def record(self, signals: Signals) -> None:
        """Remember this snapshot's pools."""
        now = signals.taken_at
        self.started = now if self.started is None else self.started
        for pool in signals.pools.values():
            q = self.samples.setdefault(pool.name, deque())
            q.append((now, pool.pending_gpus, pool.allocated_gpus + pool.pending_gpus))
            while q and now - q[0][0] > self.keep:
                q.popleft()
        self.lends = [x for x in self.lends if now - x.at <= self.keep]

    def lent(self, donor: str, taker: str, at: float, nodes: int) -> None:
        """A lend from `donor` to `taker` was proposed."""
        self.lends.append(Lend(at, donor, taker, nodes))

    def watched_min(self, now: float) -> float:
        """Minutes of history, counting the newest sample's interval (as the backtest counts its steps)."""
        if self.started is None:
            return 0.0
        gaps = [now - q[-2][0] for q in self.samples.values() if len(q) > 1 and q[-1][0] == now]
        return (now - self.started + max(gaps, default=0.0)) / 60.0

    def window(self, pool: str, now: float, seconds: float) -> list[tuple[float, int, int]]:
        """Samples of the last `seconds` (the one exactly `seconds` old excluded), oldest first."""
        out = []
        for sample in reversed(self.samples.get(pool, ())):  # samples are in time order
            if now - sample[0] >= seconds:
                break
            out.append(sample)
        out.reverse()
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "samples": {p: list(map(list, q)) for p, q in self.samples.items()},
            "lends": [[x.at, x.donor, x.taker, x.nodes] for x in self.lends],
            "started": self.started,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolHistory:
        """Back from `to_dict` (a lend saved as [at, taker, nodes] by older versions has no donor)."""
        out = cls()
        out.samples = {
            p: deque((float(t), int(a), int(b)) for t, a, b in q) for p, q in data["samples"].items()
        }
        for item in data["lends"]:
            at, *pools, nodes = item
            donor, taker = pools if len(pools) == 2 else (pools[0], pools[0])
            out.lends.append(Lend(float(at), str(donor), str(taker), int(nodes)))
        out.started = data["started"]
        return out


@dataclass
class _FedOutlooks:
    """Per pool, a demand outlook and the time of the newest sample it has seen (for one parameter set)."""

    key: tuple[float, float, float]
    histories: dict[str, DemandHistory]
    until: dict[str, float]


def cluster_view(
    signals: Signals,
    history: PoolHistory,
    gpus_per_node: int,
    policy: RebalancePolicy,
    placement: Placement | None = None,
) -> ClusterView:
    """The rebalance planner's view of this snapshot.

    With a `placement` (read from the store): loans, home partitions (capacity less borrowed nodes plus own
    nodes away), capacity and idle whole nodes less the nodes on their way out, and the moves in the store.
    Without one: no loans, home = capacity, and the lends `history` remembers.
    """
    now, g, p = signals.taken_at, gpus_per_node, policy.params
    where = placement or Placement()
    borrowed, lent = where.borrowed(), where.lent()
    leaving: Counter[str] = Counter()
    idle_leaving: Counter[str] = Counter()
    for node, (_, src, _) in where.transit.items():
        info = signals.nodes.get(node)
        if info is None or src in info.pools:  # still in the pool it leaves
            leaving[src] += 1
            idle_leaving[src] += info is not None and info.state == IDLE
    pools = tuple(
        PoolSnapshot(
            name=pool.name,
            home_gpus=max(0, pool.capacity_gpus + g * (lent[pool.name] - borrowed[pool.name])),
            capacity_gpus=max(0, pool.capacity_gpus - g * leaving[pool.name]),
            allocated_gpus=pool.allocated_gpus,
            pending_gpus=pool.pending_gpus,
            idle_nodes=max(0, pool.idle_nodes - idle_leaving[pool.name]),
            outlook=history.outlook(pool.name, p),
        )
        for pool in signals.pools.values()
    )
    if placement is not None:
        moves = tuple(MoveRecord(at / 60.0, src, dst, home, k) for at, src, dst, home, k in where.records)
    else:
        moves = tuple(MoveRecord(x.at / 60.0, x.donor, x.taker, x.donor, x.nodes) for x in history.lends)
    started = history.started / 60.0 if history.started is not None else None
    return ClusterView(
        now_min=now / 60.0,
        gpus_per_node=g,
        pools=pools,
        loans=where.loans(),
        moves=moves,
        started_min=started,
        promised=dict(where.promised),
    )
