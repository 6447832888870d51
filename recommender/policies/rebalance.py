"""Pool rebalancing: lend idle whole nodes to pools whose pending GPU demand persists; take them back.

Pure logic over per-pool snapshots (no I/O, no clock): the backtest and the live recommender build a
`ClusterView` from their signals and call `RebalancePolicy.propose`. Window aggregates in a snapshot map
to PromQL (`quantile_over_time(0.2, pending[60m])`, taken at nearest rank here;
`max_over_time((allocated + pending)[8h])`).

Rules, in order:
1. Take-back (sharing safety first): a pool whose own nodes are lent and whose free capacity
   (capacity + incoming - demand) falls below its take-back headroom recalls enough nodes, from holders
   with idle nodes first. Only waiting that lasted `takeback_persistence_min` (a few minutes, well under
   the drain delay) counts, so a spike that ends before a recalled node could arrive costs no move; an
   owner that has not moved nodes within the cooldown (so a take-back cannot be a reversal) needs only
   `takeback_settled_persistence_min` (3), and none at all when it was idle (no demand) within the last
   `takeback_quiet_min` (60): its waiting is a fresh job, not a queue that comes and goes, and each
   minute of filter is a minute a rarely busy pool waits for its own nodes. No cooldown, no budget.
2. Lend: a pool whose pending GPUs stayed at or above `min_pending_nodes` nodes over the persistence
   window (its `persistence_quantile`-quantile there, 0.2: in 80% of the window's minutes; 0: all of
   them) and still do gets `ceil(min(pending now, pending lasting) / node)` nodes, less those on their
   way, from donors whose idle whole nodes exceed a reserve: their peak demand over the reserve
   window plus a headroom share of their own capacity. A pool with own nodes lent out never borrows (it
   takes back); a donor gives borrowed nodes before its own; a pool that moved nodes (lent, borrowed,
   took back) lends nothing for a cooldown, while a pool still waiting may borrow more once the nodes it
   got have arrived and had a few minutes to take load (`borrow_cooldown_min`, 15); lends over a
   trailing week and all moves (take-backs included) over the time watched (up to 30 days) stay within
   budgets per pool-day; take-backs are never refused.
3. Time-of-day plans (when `plan_days` > 0 and the caller fills the planned fields from a
   `DailyProfile`): a pool whose demand at this time of day exceeded its capacity on most recent days
   borrows `plan_lead_min` ahead of it and takes its own nodes back ahead of its own shift; a donor whose
   demand stayed low over the coming hours on every recent day may lend below its trailing peak.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from recommender.policies.daily_profile import ProfileParams
from recommender.quantiles import nearest_rank

LEND = "lend"
TAKEBACK = "takeback"


class RebalanceParamsError(ValueError):
    """Invalid policy parameters (every problem listed)."""


@dataclass(frozen=True, slots=True)
class RebalanceParams:
    """Tunables; durations in minutes, shares relative to a pool's own capacity or to one node."""

    persistence_min: float = 60.0
    persistence_quantile: float = 0.2
    min_pending_nodes: float = 1.0
    reserve_window_min: float = 480.0
    reserve_headroom: float = 0.25
    takeback_headroom: float = 0.0
    cooldown_min: float = 60.0
    borrow_cooldown_min: float = 15.0
    min_history_min: float = 120.0
    max_nodes_per_move: int = 8
    lend_budget_per_pool_day: float = 0.4
    lend_budget_window_min: float = 10080.0
    move_budget_per_pool_day: float = 0.48
    move_budget_window_min: float = 43200.0
    takeback_persistence_min: float = 5.0
    takeback_settled_persistence_min: float = 3.0
    chronic_pending_min: float = 240.0
    plan_days: int = 7
    plan_min_days: int = 5
    plan_slot_min: float = 30.0
    plan_lead_min: float = 20.0
    plan_horizon_min: float = 240.0
    plan_recent_peak_min: float = 60.0
    plan_likely_days: int = 5
    plan_likely_window_min: float = 60.0
    takeback_quiet_min: float = 60.0

    def __post_init__(self) -> None:
        errors = [f"{f.name} must be >= 0" for f in fields(self) if getattr(self, f.name) < 0]
        if self.max_nodes_per_move < 1:
            errors.append("max_nodes_per_move must be >= 1")
        if self.persistence_min <= 0:
            errors.append("persistence_min must be > 0")
        if self.persistence_quantile >= 1:
            errors.append("persistence_quantile must be < 1")
        if self.plan_days:
            try:
                self.profile_params()
            except ValueError as exc:
                errors.append(f"plan: {exc}")
        if errors:
            raise RebalanceParamsError("; ".join(errors))

    @property
    def settled_takeback_min(self) -> float:
        """The take-back persistence window once the owner made no move within the cooldown (never longer
        than `takeback_persistence_min`)."""
        return min(self.takeback_settled_persistence_min, self.takeback_persistence_min)

    def profile_params(self) -> ProfileParams | None:
        """The time-of-day profile's parameters; None when plans are off (`plan_days` = 0)."""
        if not self.plan_days:
            return None
        return ProfileParams(
            slot_min=self.plan_slot_min,
            days=self.plan_days,
            min_days=self.plan_min_days,
            horizon_min=self.plan_horizon_min,
            likely_days=self.plan_likely_days,
            likely_window_min=self.plan_likely_window_min,
        )

    def as_dict(self) -> dict[str, float | int]:
        """Plain values for reports."""
        return dict(asdict(self))

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> RebalanceParams:
        """Build from name/value pairs; unknown names are an error."""
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise RebalanceParamsError(f"unknown parameters: {', '.join(unknown)}")
        typed: dict[str, Any] = {k: int(v) if known[k] == "int" else float(v) for k, v in values.items()}
        return cls(**typed)


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """One pool now, plus window aggregates of its recent history (GPUs unless noted).

    `pending_lasting_gpus` is the `persistence_quantile`-quantile of pending over the persistence window
    (nearest rank; the minimum when that is 0): the waiting that lasted.
    `pending_recent_min_gpus` is the minimum of pending over the take-back persistence window; None (a
    caller that does not track it) means "pending now", i.e. an immediate take-back.
    `pending_settled_min_gpus` is the same over the shorter `settled_takeback_min` window, used once
    the owner has made no move within the cooldown (None: not tracked, `pending_recent_min_gpus` is used).
    `demand_quiet_min_gpus` is the minimum of demand over `takeback_quiet_min`: 0 means the pool was idle
    within that window, so a settled owner recalls its nodes without a persistence filter (None: not
    tracked, the settled filter applies).
    `pending_chronic_min_gpus` is the minimum of pending over `chronic_pending_min` (None: not tracked).
    `planned_demand_gpus` / `planned_peak_gpus` come from a `DailyProfile` forecast (demand expected
    `plan_lead_min` ahead, peak over the plan horizon); None without a time-of-day profile.
    `demand_recent_peak_gpus` is the demand peak over `plan_recent_peak_min`: what a profile may not
    talk the reserve below (None: the trailing peak is kept whatever the profile says).
    `likely_peak_gpus` is the demand the profile saw within the next `plan_likely_window_min` on at least
    `plan_likely_days` recent days: a donor keeps it even when its trailing peak is lower (None: no
    profile).
    """

    name: str
    home_gpus: int
    capacity_gpus: int
    allocated_gpus: int
    pending_gpus: int
    idle_nodes: int
    pending_lasting_gpus: int
    demand_peak_gpus: int
    history_min: float
    pending_recent_min_gpus: int | None = None
    pending_chronic_min_gpus: int | None = None
    demand_recent_peak_gpus: int | None = None
    planned_demand_gpus: int | None = None
    planned_peak_gpus: int | None = None
    likely_peak_gpus: int | None = None
    pending_settled_min_gpus: int | None = None
    demand_quiet_min_gpus: int | None = None

    @property
    def demand_gpus(self) -> int:
        """Allocated plus pending."""
        return self.allocated_gpus + self.pending_gpus

    @classmethod
    def from_history(
        cls,
        name: str,
        *,
        home_gpus: int,
        capacity_gpus: int,
        idle_nodes: int,
        allocated: Sequence[int],
        pending: Sequence[int],
        step_min: float,
        params: RebalanceParams,
    ) -> PoolSnapshot:
        """Build from per-step history, oldest first, the last value being now (what a live caller has)."""
        if not allocated or len(allocated) != len(pending):
            raise ValueError("allocated and pending need the same, non-zero length")

        def steps(minutes: float) -> int:
            return max(1, math.ceil(minutes / step_min - 1e-9))

        window, quiet = steps(params.reserve_window_min), steps(params.takeback_quiet_min)
        span = max(window, quiet)
        demand = [a + q for a, q in zip(allocated[-span:], pending[-span:], strict=True)]
        return cls(
            name=name,
            home_gpus=home_gpus,
            capacity_gpus=capacity_gpus,
            allocated_gpus=allocated[-1],
            pending_gpus=pending[-1],
            idle_nodes=idle_nodes,
            pending_lasting_gpus=nearest_rank(
                pending[-steps(params.persistence_min) :], params.persistence_quantile
            ),
            demand_peak_gpus=max(demand[-window:]),
            history_min=len(allocated) * step_min,
            pending_recent_min_gpus=min(pending[-steps(params.takeback_persistence_min) :]),
            pending_settled_min_gpus=min(pending[-steps(params.settled_takeback_min) :]),
            demand_quiet_min_gpus=min(demand[-quiet:]) if params.takeback_quiet_min else None,
        )


@dataclass(frozen=True, slots=True)
class Loan:
    """`nodes` nodes owned by `home` are at `holder` (or on their way there when `in_transit`)."""

    home: str
    holder: str
    nodes: int
    in_transit: bool = False


@dataclass(frozen=True, slots=True)
class Evidence:
    """A signal, the window it was taken over, its value and the threshold it crossed."""

    signal: str
    window_min: float
    value: float
    threshold: float


@dataclass(frozen=True, slots=True)
class Move:
    """Move `nodes` whole nodes owned by `home_pool` from `from_pool` to `to_pool`."""

    kind: str
    from_pool: str
    to_pool: str
    home_pool: str
    nodes: int
    reason: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Everything the policy reads: pools, where lent nodes are, recent lends (time, nodes) for cooldowns
    and the lend budget. `promised`: nodes that lends proposed but not yet approved would bring to each
    pool (live only), counted as on their way when that pool asks to borrow, so a waiting pool is not
    offered more nodes while an operator decides."""

    now_min: float
    gpus_per_node: int
    pools: tuple[PoolSnapshot, ...]
    loans: tuple[Loan, ...] = ()
    last_lend_min: Mapping[str, float] | None = None
    recent_lends: tuple[tuple[float, int], ...] = ()
    recent_takebacks: tuple[tuple[float, int], ...] = ()
    promised: Mapping[str, int] | None = None


@dataclass
class _Ledger:
    """Per-call bookkeeping so one call never promises the same node twice."""

    incoming: dict[str, int]
    away: dict[str, int]
    held: dict[str, list[Loan]]
    given: dict[str, int]
    committed: dict[tuple[str, str], int]  # (home, holder): borrowed nodes already moved in this call


class RebalancePolicy:
    """Propose node moves between pools from a ClusterView."""

    name = "rebalance"

    def __init__(self, params: RebalanceParams | None = None) -> None:
        self.params = params or RebalanceParams()

    def propose(self, view: ClusterView) -> list[Move]:
        """Take-backs first, then lends; deterministic for a given view."""
        ledger = self._ledger(view)
        moves = self._takebacks(view, ledger)
        moves.extend(self._lends(view, ledger))
        return moves

    @staticmethod
    def _ledger(view: ClusterView) -> _Ledger:
        incoming: dict[str, int] = defaultdict(int)
        away: dict[str, int] = defaultdict(int)
        held: dict[str, list[Loan]] = defaultdict(list)
        for loan in view.loans:
            if loan.in_transit:
                incoming[loan.holder] += loan.nodes
            if loan.home != loan.holder:
                away[loan.home] += loan.nodes
                if not loan.in_transit:
                    held[loan.holder].append(loan)
        return _Ledger(incoming, away, held, defaultdict(int), defaultdict(int))

    def _takebacks(self, view: ClusterView, ledger: _Ledger) -> list[Move]:
        g = view.gpus_per_node
        by_name = {p.name: p for p in view.pools}
        lent_at: dict[str, list[Loan]] = defaultdict(list)
        for loans in ledger.held.values():
            for loan in loans:
                lent_at[loan.home].append(loan)
        moves: list[Move] = []
        for home in sorted(lent_at):
            pool = by_name.get(home)
            if pool is None:
                continue
            # Waiting that did not last the take-back persistence window does not recall a node; the
            # window is shorter once a take-back could not be a reversal (no move within the cooldown).
            recent = self._lasting_wait(view, pool)
            held = pool.allocated_gpus + min(recent, pool.pending_gpus)
            planned = pool.planned_demand_gpus or 0
            free = pool.capacity_gpus + g * ledger.incoming[home] - max(held, planned)
            margin = self.params.takeback_headroom * pool.home_gpus
            if free >= margin:
                continue
            need = max(1, math.ceil((margin - free) / g))
            if planned > held:
                reason = "owner's time-of-day demand is due"
                evidence: tuple[Evidence, ...] = (
                    Evidence("planned_demand_gpus", self._plan_window(), float(planned), 0.0),
                )
            elif self._fresh_job(view, pool):
                reason = "owner demand returned after an idle spell"
                evidence = (
                    Evidence("free_gpus", 0.0, float(free), margin),
                    Evidence("demand_gpus_min", self.params.takeback_quiet_min, 0.0, 0.0),
                )
            else:
                reason = "owner demand returned"
                evidence = (Evidence("free_gpus", 0.0, float(free), margin),)

            def cheapest(loan: Loan) -> tuple[int, int, str]:
                holder = by_name.get(loan.holder)
                idle = holder.idle_nodes - ledger.given[loan.holder] if holder else 0
                return (-idle, holder.pending_gpus if holder else 0, loan.holder)

            for loan in sorted(lent_at[home], key=cheapest):
                take = min(need, loan.nodes)
                if take <= 0:
                    break
                need -= take
                ledger.given[loan.holder] += take
                ledger.committed[(home, loan.holder)] += take
                ledger.incoming[home] += take
                moves.append(Move(TAKEBACK, loan.holder, home, home, take, reason, evidence))
        return moves

    def _lasting_wait(self, view: ClusterView, pool: PoolSnapshot) -> int:
        """The owner's waiting that lasted the take-back persistence window that applies now: none for a
        settled owner that was idle within `takeback_quiet_min`, the settled window for another settled
        owner, the full window for an owner that moved nodes within the cooldown."""
        if self._fresh_job(view, pool):
            return pool.pending_gpus
        if pool.pending_settled_min_gpus is not None and not self._cooling(view, pool.name):
            return pool.pending_settled_min_gpus
        if pool.pending_recent_min_gpus is not None:
            return pool.pending_recent_min_gpus
        return pool.pending_gpus

    def _fresh_job(self, view: ClusterView, pool: PoolSnapshot) -> bool:
        """Whether the owner's waiting needs no filter: it made no move within the cooldown and had no
        demand at some minute of the last `takeback_quiet_min`."""
        return (
            bool(self.params.takeback_quiet_min)
            and pool.demand_quiet_min_gpus == 0
            and pool.pending_settled_min_gpus is not None
            and not self._cooling(view, pool.name)
        )

    def _cooling(self, view: ClusterView, pool: str, window_min: float | None = None) -> bool:
        """Whether the pool moved nodes within the cooldown (inclusive: a move back exactly
        `cooldown_min` later would still count as a reversal)."""
        last = (view.last_lend_min or {}).get(pool)
        window = self.params.cooldown_min if window_min is None else window_min
        return last is not None and view.now_min - last <= window

    def _spare_nodes(self, view: ClusterView, pool: PoolSnapshot, ledger: _Ledger, *, planned: bool) -> int:
        """Idle whole nodes above the pool's reserve (0 while its history is too short).

        The reserve keeps the trailing demand peak, unless the donor's time-of-day profile says it stayed
        quiet over the coming hours on every recent day: then it keeps that expected peak, and for a
        reactive lend also its peak of the last few hours (a plan knows a shift ended; a reaction does not).
        It always keeps what the profile says the donor reached within the next hour on most recent days
        (a node lent just before the donor's usual rise would come back within the reversal window).
        """
        p = self.params
        if pool.history_min < p.min_history_min or self._cooling(view, pool.name):
            return 0
        peak = pool.demand_peak_gpus
        if pool.planned_peak_gpus is not None and (planned or pool.demand_recent_peak_gpus is not None):
            recent = 0 if planned else pool.demand_recent_peak_gpus or 0
            peak = min(peak, max(pool.planned_peak_gpus, recent))
        keep = max(peak, pool.demand_gpus, pool.planned_demand_gpus or 0, pool.likely_peak_gpus or 0)
        reserve = keep + p.reserve_headroom * pool.home_gpus
        spare = math.floor((pool.capacity_gpus - reserve) / view.gpus_per_node)
        return max(0, min(spare, pool.idle_nodes) - ledger.given[pool.name])

    def _persistent_pending(self, pool: PoolSnapshot, threshold: float, g: int) -> int:
        """Pending that lasted the persistence window; a pool that has waited for less than a node
        over the (longer) chronic window counts as waiting for one node."""
        persistent = min(pool.pending_gpus, pool.pending_lasting_gpus)
        chronic = pool.pending_chronic_min_gpus
        window = self.params.chronic_pending_min
        if persistent < threshold and chronic and window and pool.history_min >= window:
            return max(persistent, g if min(chronic, pool.pending_gpus) >= 1 else 0)
        return persistent

    def _plan_window(self) -> float:
        """Minutes of history a time-of-day forecast looks back over."""
        return self.params.plan_days * 1440.0

    @staticmethod
    def _planned_shortfall(pool: PoolSnapshot, incoming_gpus: int) -> int:
        """GPUs the pool's time-of-day demand will exceed its capacity (incoming nodes included) by."""
        if pool.planned_demand_gpus is None:
            return 0
        return max(0, pool.planned_demand_gpus - pool.capacity_gpus - incoming_gpus)

    def lend_budget(self, view: ClusterView) -> int:
        """Nodes that may still be lent: the lend rate over its window less recent lends and, with a move
        budget, the moves (lends and take-backs) allowed over its window less those made.

        The move budget's window grows with the time watched (at least the lend window, at most its own),
        so a new deployment cannot spend a month's moves in its first week. Take-backs never wait for a
        budget (sharing safety comes first); they only use it up.
        """
        p = self.params
        lends = view.recent_lends
        left = self._budget_left(view, p.lend_budget_per_pool_day, p.lend_budget_window_min, lends)
        if p.move_budget_per_pool_day:
            watched = max((s.history_min for s in view.pools), default=0.0)
            span = min(p.move_budget_window_min, max(watched, p.lend_budget_window_min))
            moves = lends + view.recent_takebacks
            left = min(left, self._budget_left(view, p.move_budget_per_pool_day, span, moves))
        return max(0, left)

    @staticmethod
    def _budget_left(
        view: ClusterView, per_pool_day: float, window_min: float, moves: Sequence[tuple[float, int]]
    ) -> int:
        """A budget of `per_pool_day` nodes per pool-day over the trailing window, less the nodes moved."""
        allowed = per_pool_day * len(view.pools) * window_min / 1440.0
        used = sum(n for t, n in moves if view.now_min - t < window_min)
        return math.floor(allowed + 1e-9) - used

    def _lends(self, view: ClusterView, ledger: _Ledger) -> list[Move]:
        p, g = self.params, view.gpus_per_node
        threshold = p.min_pending_nodes * g
        persistent = {s.name: self._persistent_pending(s, threshold, g) for s in view.pools}
        promised = view.promised or {}
        coming = {s.name: ledger.incoming[s.name] + promised.get(s.name, 0) for s in view.pools}
        planned = {s.name: self._planned_shortfall(s, g * coming[s.name]) for s in view.pools}
        borrowers = [
            s
            for s in view.pools
            if (
                (s.history_min >= p.persistence_min and persistent[s.name] >= max(threshold, 1))
                or planned[s.name] >= g
            )
            and ledger.away[s.name] == 0
            and not self._cooling(view, s.name, p.borrow_cooldown_min)
        ]
        if not borrowers:
            return []
        borrowers.sort(key=lambda s: (-max(s.pending_lasting_gpus, planned[s.name]), s.name))
        budget = self.lend_budget(view)
        receivers: set[str] = set()
        moves: list[Move] = []
        for borrower in borrowers:
            want_now = math.ceil(persistent[borrower.name] / g) - coming[borrower.name]
            want_planned = planned[borrower.name] // g
            want = min(max(want_now, want_planned), p.max_nodes_per_move, budget)
            on_plan = want_planned > want_now
            if on_plan:
                cause = Evidence("planned_demand_gpus", self._plan_window(), float(planned[borrower.name]), g)
            elif min(borrower.pending_gpus, borrower.pending_lasting_gpus) < persistent[borrower.name]:
                chronic = float(borrower.pending_chronic_min_gpus or 0)
                cause = Evidence("pending_gpus_chronic_min", p.chronic_pending_min, chronic, 1.0)
            else:
                cause = Evidence(
                    "pending_gpus_lasting", p.persistence_min, float(persistent[borrower.name]), threshold
                )
            receivers.add(borrower.name)
            spare = {
                s.name: self._spare_nodes(view, s, ledger, planned=on_plan)
                for s in view.pools
                if s.name not in receivers
            }
            for donor in sorted((n for n, k in spare.items() if k > 0), key=lambda n: (-spare[n], n)):
                if want <= 0:
                    break
                take = min(want, spare[donor])
                evidence = (
                    cause,
                    Evidence("donor_spare_nodes", p.reserve_window_min, float(spare[donor]), 1.0),
                )
                moves.extend(self._split_by_home(donor, borrower.name, take, evidence, ledger))
                want -= take
                budget -= take
                ledger.incoming[borrower.name] += take
        return moves

    @staticmethod
    def _split_by_home(
        donor: str, borrower: str, nodes: int, evidence: tuple[Evidence, ...], ledger: _Ledger
    ) -> list[Move]:
        """Borrowed nodes leave first (their owners keep theirs home), then the donor's own."""
        moves: list[Move] = []
        reason = {
            "planned_demand_gpus": "time-of-day demand due",
            "pending_gpus_chronic_min": "chronic pending demand below a node",
        }.get(evidence[0].signal if evidence else "", "persistent pending demand")
        reason += ", idle nodes above the donor's reserve"
        by_home: dict[str, int] = defaultdict(int)
        for loan in ledger.held[donor]:
            by_home[loan.home] += loan.nodes
        for home in sorted(by_home):
            take = min(nodes, by_home[home] - ledger.committed[(home, donor)])
            if take > 0 and home != borrower:
                moves.append(Move(LEND, donor, borrower, home, take, reason, evidence))
                ledger.committed[(home, donor)] += take
                nodes -= take
        if nodes > 0:
            moves.append(Move(LEND, donor, borrower, donor, nodes, reason, evidence))
        ledger.given[donor] += sum(m.nodes for m in moves)
        return moves
