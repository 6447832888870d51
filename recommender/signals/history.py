"""Per-pool history kept across cycles, and the rebalance policy's `ClusterView` built from Signals.

The windows of a `PoolSnapshot` (pending quantile over the persistence window, minimum over the
take-back persistence window, demand peak over the reserve window, demand minimum over the quiet
window) are computed here from the snapshots
seen so far, as PromQL's `quantile_over_time` (at nearest rank), `min_over_time` and `max_over_time`
would (a window of W minutes holds the samples of the last W minutes, the
one W minutes old excluded, like the backtest's W one-minute steps); `history_min` is how long this
recommender has watched (plus the newest sample's interval); until it covers a take-back window, no
waiting counts as lasting over it (`pending_recent_min_gpus` and `pending_settled_min_gpus` are 0).
Loans, home partitions and recent lends come from the proposal store (`signals/placement.py`); a caller
without a store falls back to the lends this process proposed.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from functools import partial
from typing import Any

from recommender.policies.daily_profile import DailyProfile, ProfileParams
from recommender.policies.rebalance import ClusterView, PoolSnapshot, RebalanceParams, RebalancePolicy
from recommender.quantiles import nearest_rank
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
        self._profile: _FedProfile | None = None

    def profile(self, params: ProfileParams) -> DailyProfile:
        """The time-of-day profile of every pool's demand, fed with the samples not fed yet (rebuilt from
        the kept samples when the parameters change, e.g. after a restart)."""
        if self._profile is None or self._profile.profile.params != params:
            self._profile = _FedProfile(DailyProfile(params), {})
        fed = self._profile
        for pool, q in self.samples.items():
            since = fed.until.get(pool, float("-inf"))
            fresh = []
            for sample in reversed(q):
                if sample[0] <= since:
                    break
                fresh.append(sample)
            for t, _, demand in reversed(fresh):
                fed.profile.record(pool, t / 60.0, demand)
            if q:
                fed.until[pool] = q[-1][0]
        return fed.profile

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
class _FedProfile:
    """A profile and, per pool, the time of the newest sample it has seen."""

    profile: DailyProfile
    until: dict[str, float]


def _pending_quantile(
    history: PoolHistory, pool: str, now: float, minutes: float, pending_now: int, *, q: float = 0.0
) -> int:
    """The nearest-rank `q`-quantile of pending over the last `minutes` (0: min_over_time), now included."""
    window = [s[1] for s in history.window(pool, now, minutes * 60.0)]
    return nearest_rank(window, q) if window else pending_now


def _pending_lasted(
    history: PoolHistory, pool: str, now: float, minutes: float, *, pending_now: int, watched: float
) -> int:
    """min_over_time of pending over the last `minutes`; 0 until this recommender has watched that long
    (waiting not yet watched for the whole window has not lasted)."""
    if watched + 1e-9 < minutes:
        return 0
    return _pending_quantile(history, pool, now, minutes, pending_now)


def _longer_windows(
    history: PoolHistory, pool: str, now: float, p: RebalanceParams, *, pending_now: int, watched: float
) -> dict[str, int | None]:
    """Chronic pending (min over `chronic_pending_min`, once watched that long), the demand peak over
    `plan_recent_peak_min` and the demand minimum over `takeback_quiet_min` (once watched that long: an
    idle spell not yet watched is not assumed)."""
    chronic = quiet = None
    if p.chronic_pending_min and watched + 1e-9 >= p.chronic_pending_min:
        chronic = _pending_quantile(history, pool, now, p.chronic_pending_min, pending_now)
    if p.takeback_quiet_min and watched + 1e-9 >= p.takeback_quiet_min:
        quiet = min((s[2] for s in history.window(pool, now, p.takeback_quiet_min * 60.0)), default=None)
    recent = history.window(pool, now, p.plan_recent_peak_min * 60.0)
    return {
        "pending_chronic_min_gpus": chronic,
        "demand_recent_peak_gpus": max((s[2] for s in recent), default=None),
        "demand_quiet_min_gpus": quiet,
    }


def cluster_view(
    signals: Signals,
    history: PoolHistory,
    gpus_per_node: int,
    policy: RebalancePolicy,
    placement: Placement | None = None,
) -> ClusterView:
    """The rebalance policy's view of this snapshot.

    With a `placement` (read from the store): loans, home partitions (capacity less borrowed nodes plus own
    nodes away), capacity and idle whole nodes less the nodes on their way out, and the lends in the store.
    Without one: no loans, home = capacity, and the lends `history` remembers.
    """
    now, g, p = signals.taken_at, gpus_per_node, policy.params
    where = placement or Placement()
    watched = history.watched_min(now)
    borrowed, lent = where.borrowed(), where.lent()
    leaving: Counter[str] = Counter()
    idle_leaving: Counter[str] = Counter()
    for node, (_, src, _) in where.transit.items():
        info = signals.nodes.get(node)
        if info is None or src in info.pools:  # still in the pool it leaves
            leaving[src] += 1
            idle_leaving[src] += info is not None and info.state == IDLE
    profile_params = p.profile_params()
    profile = history.profile(profile_params) if profile_params else None
    pools = []
    for pool in signals.pools.values():
        long = history.window(pool.name, now, p.reserve_window_min * 60.0)
        forecast = profile.forecast(pool.name, now / 60.0 + p.plan_lead_min) if profile else None
        near = profile.forecast(pool.name, now / 60.0) if profile else None
        lasted = partial(
            _pending_lasted, history, pool.name, now, pending_now=pool.pending_gpus, watched=watched
        )
        pools.append(
            PoolSnapshot(
                name=pool.name,
                home_gpus=max(0, pool.capacity_gpus + g * (lent[pool.name] - borrowed[pool.name])),
                capacity_gpus=max(0, pool.capacity_gpus - g * leaving[pool.name]),
                allocated_gpus=pool.allocated_gpus,
                pending_gpus=pool.pending_gpus,
                idle_nodes=max(0, pool.idle_nodes - idle_leaving[pool.name]),
                pending_lasting_gpus=_pending_quantile(
                    history, pool.name, now, p.persistence_min, pool.pending_gpus, q=p.persistence_quantile
                ),
                demand_peak_gpus=max((s[2] for s in long), default=pool.allocated_gpus + pool.pending_gpus),
                history_min=watched,
                pending_recent_min_gpus=lasted(p.takeback_persistence_min),
                pending_settled_min_gpus=lasted(p.settled_takeback_min),
                **_longer_windows(history, pool.name, now, p, pending_now=pool.pending_gpus, watched=watched),
                planned_demand_gpus=forecast.expected_demand if forecast else None,
                planned_peak_gpus=forecast.expected_peak if forecast else None,
                likely_peak_gpus=near.likely_peak if near else None,
            )
        )
    lends = where.lends if placement is not None else history.lends
    last: dict[str, float] = {}
    for lend in lends:
        for name in (lend.donor, lend.taker):
            last[name] = max(last.get(name, -1e18), lend.at / 60.0)
    for at, owner, _ in where.takebacks:  # an owner that took nodes back does not lend them again at once
        last[owner] = max(last.get(owner, -1e18), at / 60.0)
    return ClusterView(
        now_min=now / 60.0,
        gpus_per_node=g,
        pools=tuple(pools),
        loans=where.loans(),
        last_lend_min=last,
        recent_lends=tuple((x.at / 60.0, x.nodes) for x in lends),
        recent_takebacks=tuple((at / 60.0, nodes) for at, _, nodes in where.takebacks),
        promised=dict(where.promised),
    )
