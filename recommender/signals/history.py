"""Per-pool history kept across cycles, and the rebalance policy's `ClusterView` built from Signals.

The windows of a `PoolSnapshot` (pending minimum over the persistence window, demand peak over the reserve
window) are computed here from the snapshots seen so far, as PromQL's `min_over_time`/`max_over_time`
would; `history_min` is how long this recommender has watched.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from recommender.policies.rebalance import ClusterView, PoolSnapshot, RebalancePolicy
from recommender.signals.model import Signals


class PoolHistory:
    """(time, pending, demand) per pool, and recent lends, trimmed to the longest window needed."""

    def __init__(self, keep_seconds: float = 7 * 86400.0) -> None:
        self.keep = keep_seconds
        self.samples: dict[str, deque[tuple[float, int, int]]] = {}
        self.lends: list[tuple[float, str, int]] = []
        self.started: float | None = None

    def record(self, signals: Signals) -> None:
        """Remember this snapshot's pools."""
        now = signals.taken_at
        self.started = now if self.started is None else self.started
        for pool in signals.pools.values():
            q = self.samples.setdefault(pool.name, deque())
            q.append((now, pool.pending_gpus, pool.allocated_gpus + pool.pending_gpus))
            while q and now - q[0][0] > self.keep:
                q.popleft()
        self.lends = [x for x in self.lends if now - x[0] <= self.keep]

    def lent(self, pool: str, at: float, nodes: int) -> None:
        """A lend to `pool` was proposed."""
        self.lends.append((at, pool, nodes))

    def window(self, pool: str, now: float, seconds: float) -> list[tuple[float, int, int]]:
        """Samples of the last `seconds`."""
        return [s for s in self.samples.get(pool, ()) if now - s[0] <= seconds]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "samples": {p: list(map(list, q)) for p, q in self.samples.items()},
            "lends": [list(x) for x in self.lends],
            "started": self.started,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolHistory:
        """Back from `to_dict`."""
        out = cls()
        out.samples = {
            p: deque((float(t), int(a), int(b)) for t, a, b in q) for p, q in data["samples"].items()
        }
        out.lends = [(float(t), str(p), int(n)) for t, p, n in data["lends"]]
        out.started = data["started"]
        return out


def cluster_view(
    signals: Signals, history: PoolHistory, gpus_per_node: int, policy: RebalancePolicy
) -> ClusterView:
    """The rebalance policy's view of this snapshot (loans are not tracked by the live recommender)."""
    now = signals.taken_at
    p = policy.params
    watched = (now - history.started) / 60.0 if history.started is not None else 0.0
    pools = []
    for pool in signals.pools.values():
        recent = history.window(pool.name, now, p.persistence_min * 60.0) or [(now, pool.pending_gpus, 0)]
        long = history.window(pool.name, now, p.reserve_window_min * 60.0)
        pools.append(
            PoolSnapshot(
                name=pool.name,
                home_gpus=pool.capacity_gpus,
                capacity_gpus=pool.capacity_gpus,
                allocated_gpus=pool.allocated_gpus,
                pending_gpus=pool.pending_gpus,
                idle_nodes=pool.idle_nodes,
                pending_min_gpus=min(s[1] for s in recent),
                demand_peak_gpus=max((s[2] for s in long), default=pool.allocated_gpus + pool.pending_gpus),
                history_min=watched,
            )
        )
    last: dict[str, float] = {}
    for at, taker, _ in history.lends:
        last[taker] = max(last.get(taker, -1e18), at / 60.0)
    return ClusterView(
        now_min=now / 60.0,
        gpus_per_node=gpus_per_node,
        pools=tuple(pools),
        last_lend_min=last,
        recent_lends=tuple((at / 60.0, n) for at, _, n in history.lends),
    )
