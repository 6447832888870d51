"""Pool rebalancing as a budgeted planner: lend whole nodes where the loan is worth the move.

Pure logic (no I/O, no clock): the backtest and the live recommender build a `ClusterView` and call
`RebalancePolicy.propose`. Each call:

1. **Take-backs** (sharing safety first). An owner whose demand exceeds its capacity (incoming nodes
   counted) while its own nodes are held elsewhere recalls just enough of them, idle ones first; an owner
   too **sparse** to afford even a reclaim's wait (below) recalls all of them at once (its next burst is
   of unknown size). A node comes home by **drain** (its holder's jobs left to end; the owner waits
   `drain_min`) or by **reclaim** (the holder's jobs on it requeued; the owner waits `reclaim_min`, the
   holder loses `preempt_loss_min` of work per GPU it ran there): reclaimed when the owner wants it now and
   either the owner's wait allowance cannot absorb a drain or the waiting the drain would add exceeds the
   work the requeue loses. A loan younger than the reversal window is never recalled, by either (that would
   be a reversal); take-backs are prepaid by the lend (below), so no budget holds them back.
2. **Lends** (when the view is a planning cycle). For every taker (a pool whose demand exceeds its
   capacity and which has none of its own nodes away) and every donor with an idle whole node, the
   planner values lending one more node:

       value = use x (L - drain) - cost x min(1, rises / watched x L)

   `L` is the loan's expected length: how long the donor's node is expected to stay idle (the mean spacing of
   its demand's rises above the level it would keep, over the window that covers its idle span; with no rise
   there, persistence: as long as it already has, capped at the history window; cut short where a calibrated
   time-of-day profile expects the donor's demand back). `use` is what one more node would serve the taker per
   minute over L, forecast at L's own scale (the trailing hour, day or week, blended with the last hour's by
   their past skill on that pool, or the profile where it forecasts better). The last term is the donor's
   expected take-back at the rate its demand rose above the level it keeps, at the cheaper `cost` of the
   take-backs its wait allowance absorbs: a drain (`node x drain`) while the drains of its rises fit `rises x
   drain <= (1 - wait_quantile) x busy minutes`, a reclaim (`node x reclaim + use x preempt_loss`) while
   reclaims do. A loan must outlast the reversal window by the
   take-back's lead. A pool with demand but too few demand minutes to absorb a single reclaim (`(1 - q) x busy
   < reclaim`) is **sparse**: it lends nothing (a pool with no demand at all over the window, the slow lane,
   lends freely). Nodes go one at a time to the best value per budget token, while that value pays at least
   the token's price.
3. **The budget** is a token bucket: `moves_per_pool_day x pools` tokens a day, holding at most one
   day's worth (at least the 2 tokens of one lend) and starting empty (the future's budget is never
   spent). A lend from the node's home costs 2 tokens (the move and its return), a lend of a borrowed
   node onward 1 (its return is already paid), a take-back 0 (by drain or by reclaim). So the moves made
   never exceed the tokens accrued plus the bucket. A token's price is what tokens have been buying,
   falling as the bucket fills (see `token_price`).
4. No pair of pools exchanges nodes in both directions within the reversal window (no reversals).

Every move carries its evidence: the taker's forecast use and the loan expected, the donor's idle span,
rises and allowance, the take-back its protection assumed, the value expected and the budget left; a
reclaim, the GPUs it requeues and the work they lose against the owner's waiting it spares.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

from recommender.policies.outlook import Outlook

LEND = "lend"
TAKEBACK = "takeback"
RECLAIM = "reclaim"
DAY_MIN = 1440.0
REVERSAL, PROTECTION, VALUE, BUDGET = (
    "reversal window",
    "donor protection",
    "value below token price",
    "move budget",
)
STAGES = (REVERSAL, PROTECTION, VALUE, BUDGET)


class RebalanceParamsError(ValueError):
    """Invalid planner parameters (every problem listed)."""


@dataclass(frozen=True, slots=True)
class RebalanceParams:
    """The planner's constants; each has a physical meaning (minutes unless noted).

    - `cycle_min` (10): how often the planner considers lends (take-backs are checked at every call).
    - `drain_min` (11): minutes a moved node serves nobody (the model's 10-minute drain, partition update
      and read-back, plus the decision step): what an owner waits for a take-back by drain.
    - `reclaim_min` (3): what an owner waits for a take-back by **reclaim** (the holder's jobs on the node
      requeued: partition update, read-back and the owner's job start, 2 minutes, plus the decision step).
    - `preempt_loss_min` (30): GPU-minutes of work a requeued GPU loses (the work since its last
      checkpoint): the price of a reclaim, paid by the holder.
    - `reversal_min` (60): no node moves back within it; also the shortest idle span of a node worth
      lending, the window of the taker's recent shortfall, and an hour of a node's work is a token's price.
    - `moves_per_pool_day` (0.5): the move budget.
    - `wait_quantile` (0.99): the wait target: a donor's take-backs may make it wait in at most
      `1 - wait_quantile` of its demand minutes (the p99 target).
    - `history_min` (7 days): the forecast's history and the longest loan it expects (a week holds every
      day of the week once).
    """

    cycle_min: float = 10.0
    drain_min: float = 11.0
    reclaim_min: float = 3.0
    preempt_loss_min: float = 30.0
    reversal_min: float = 60.0
    moves_per_pool_day: float = 0.5
    wait_quantile: float = 0.99
    history_min: float = 7 * DAY_MIN

    def __post_init__(self) -> None:
        errors = [f"{f.name} must be > 0" for f in fields(self) if not getattr(self, f.name) > 0]
        if not self.wait_quantile < 1:
            errors.append("wait_quantile must be < 1")
        if self.history_min < self.reversal_min:
            errors.append("history_min must be >= reversal_min")
        if errors:
            raise RebalanceParamsError("; ".join(errors))

    def as_dict(self) -> dict[str, float]:
        """Plain values for reports."""
        return dict(asdict(self))

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> RebalanceParams:
        """Build from name/value pairs; unknown names are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise RebalanceParamsError(f"unknown parameters: {', '.join(unknown)}")
        return cls(**{k: float(v) for k, v in values.items()})

    def gap_min(self) -> float:
        """A taker's shortfall episode ends at a gap this long (a shorter dip could not return a node)."""
        return self.drain_min

    def takeback_waits(self) -> tuple[float, ...]:
        """What an owner waits for a take-back, by drain and (when it is faster) by reclaim."""
        return (self.drain_min, self.reclaim_min) if self.reclaim_min < self.drain_min else (self.drain_min,)

    def fastest_takeback(self) -> float:
        """The shortest wait a take-back can cost its owner."""
        return min(self.takeback_waits())


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """One pool now (GPUs) and its demand outlook. `capacity_gpus` leaves out nodes on their way out;
    `idle_nodes` counts idle whole nodes it could send (own at home or borrowed)."""

    name: str
    home_gpus: int
    capacity_gpus: int
    allocated_gpus: int
    pending_gpus: int
    idle_nodes: int
    outlook: Outlook

    @property
    def demand_gpus(self) -> int:
        """Allocated plus pending."""
        return self.allocated_gpus + self.pending_gpus


@dataclass(frozen=True, slots=True)
class Loan:
    """`nodes` nodes owned by `home` are at `holder` (or on their way there when `in_transit`)."""

    home: str
    holder: str
    nodes: int
    in_transit: bool = False


@dataclass(frozen=True, slots=True)
class MoveRecord:
    """A move already made (or proposed and counted): when, from, to, whose nodes, how many."""

    at_min: float
    src: str
    dst: str
    home: str
    nodes: int

    @property
    def tokens(self) -> int:
        """Budget tokens it cost: 2 per node lent from home, 1 per node lent onward, 0 for a take-back."""
        if self.dst == self.home:
            return 0
        return (2 if self.src == self.home else 1) * self.nodes


@dataclass(frozen=True, slots=True)
class Evidence:
    """A signal, the window it was taken over, its value and the threshold it was compared with."""

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
    """Everything the planner reads. `moves`: the moves made since `started_min` (the budget replays
    them; the reversal rule reads the recent ones). `promised` (live only): nodes that lends proposed but
    not yet approved would bring to each pool. `plan`: whether this call may lend (a planning cycle)."""

    now_min: float
    gpus_per_node: int
    pools: tuple[PoolSnapshot, ...]
    loans: tuple[Loan, ...] = ()
    moves: tuple[MoveRecord, ...] = ()
    started_min: float | None = None
    promised: Mapping[str, int] | None = None
    plan: bool = True


@dataclass
class _Ledger:
    """Per-call bookkeeping so one call never promises the same node twice."""

    incoming: dict[str, int]
    away: dict[str, int]
    held: dict[str, list[Loan]]
    given: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    committed: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class _Candidate:
    per_token: float
    value: float
    taker: str
    donor: str
    home: str
    cost: int
    use: float
    loan_min: float
    rises: int
    allowed_rises: float
    busy: int
    takeback_wait: float  # what the donor's protection assumed a take-back costs it: a drain or a reclaim

    spread: int = 0

    @property
    def rank(self) -> tuple[float, int, int, int]:
        """Best value per token first; at equal value the safer donor: fewer rises, fewer demand minutes
        (the slow lane), then fewer of its nodes already away (one wake-up recalls them all at once)."""
        return (round(self.per_token, 6), -self.rises, -self.busy, -self.spread)


class RebalancePolicy:
    """Propose node moves between pools from a ClusterView."""

    name = "rebalance"

    def __init__(self, params: RebalanceParams | None = None) -> None:
        self.params = params or RebalanceParams()
        # why each waiting pool got no (more) nodes at the last planning call (diagnostics only)
        self.blocked: dict[str, str] = {}
        # (minute, best value per token) of each planning call over the last day: what a token can buy
        self.offers: deque[tuple[float, float]] = deque()

    # --- budget ---------------------------------------------------------------------------------------

    def bucket_capacity(self, pools: int) -> float:
        """Tokens the bucket holds at most: one day's worth, and never less than one lend from home (2)."""
        return max(2.0, self.params.moves_per_pool_day * pools)

    def budget_left(self, view: ClusterView) -> float:
        """Tokens in the bucket now: it starts empty at `started_min` (or at the first move), fills at
        `moves_per_pool_day x pools` a day up to one day's worth, and each move takes its tokens."""
        pools = len(view.pools)
        rate = self.params.moves_per_pool_day * pools / DAY_MIN
        cap = self.bucket_capacity(pools)
        moves = sorted((m for m in view.moves if m.at_min <= view.now_min), key=lambda m: m.at_min)
        start = view.started_min
        if start is None:
            start = moves[0].at_min if moves else view.now_min
        level, t = 0.0, start
        for move in moves:
            if move.at_min >= t:
                level = min(cap, level + rate * (move.at_min - t))
                t = move.at_min
            level -= move.tokens
        return min(cap, level + rate * max(0.0, view.now_min - t))

    def token_price(self, level: float, pools: int, g: int) -> float:
        """GPU-minutes a token must buy: what tokens have been buying, the value per token of the k-th best
        offer of the last day's planning calls (k: the lends a day's tokens pay for; at least an hour of a
        node's work), scaled by how empty the bucket is (0 with a full one: tokens about to overflow buy
        anything of value)."""
        cap = self.bucket_capacity(pools)
        fill = min(1.0, max(0.0, level / cap)) if cap > 0 else 1.0
        floor = g * self.params.reversal_min
        k = max(1, math.floor(self.params.moves_per_pool_day * pools / 2))
        best = sorted((v for _, v in self.offers), reverse=True)
        going = best[k - 1] if len(best) >= k else 0.0
        return max(floor, going) * (1.0 - fill)

    def _remember_offer(self, now: float, per_token: float) -> None:
        offers = self.offers
        while offers and offers[0][0] <= now - DAY_MIN:
            offers.popleft()
        offers.append((now, per_token))

    # --- the call -------------------------------------------------------------------------------------

    def propose(self, view: ClusterView) -> list[Move]:
        """Take-backs first, then (in a planning cycle) lends; deterministic for a given view."""
        ledger = self._ledger(view)
        recent = self._recent_pairs(view)
        level = self.budget_left(view)
        moves = self._takebacks(view, ledger, recent, level)
        if view.plan:
            moves.extend(self._lends(view, ledger, recent, level))
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
        return _Ledger(incoming, away, held)

    def _recent_pairs(self, view: ClusterView) -> set[tuple[str, str]]:
        """(src, dst) pairs that moved nodes within the reversal window (inclusive): dst may not send to
        src now."""
        window = self.params.reversal_min
        return {(m.src, m.dst) for m in view.moves if 0 <= view.now_min - m.at_min <= window}

    def _takebacks(
        self, view: ClusterView, ledger: _Ledger, recent: set[tuple[str, str]], level: float
    ) -> list[Move]:
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
            have = pool.capacity_gpus + g * ledger.incoming[home]
            short = pool.demand_gpus - have
            due = pool.outlook.demand_soon() - have
            sparse = pool.demand_gpus > 0 and self.sparse(pool)
            if short <= 0 and due <= 0 and not sparse:
                continue
            need = max(1, math.ceil(max(short, due) / g))
            if sparse:
                need = sum(loan.nodes for loan in lent_at[home])

            def cheapest(loan: Loan) -> tuple[int, int, str]:
                holder = by_name.get(loan.holder)
                idle = holder.idle_nodes - ledger.given[loan.holder] if holder else 0
                return (-idle, holder.pending_gpus if holder else 0, loan.holder)

            evidence = (
                Evidence("owner_shortfall_gpus", 0.0, float(short), 0.0),
                Evidence("move_budget_tokens", DAY_MIN, round(level, 2), 0.0),
            )
            reason = (
                "owner demand returned"
                if short > 0
                else "sparse owner woke up: all its nodes home"
                if sparse
                else "owner demand due before a node could arrive"
            )
            # a sparse owner's burst is of unknown size: each node it recalls is taken as needed at once
            wanting = need * g if sparse else max(0, short)
            affords = self.affords_drain(pool) if len(self.params.takeback_waits()) > 1 else True
            for loan in sorted(lent_at[home], key=cheapest):
                if need <= 0:
                    break
                if (home, loan.holder) in recent:  # lent within the reversal window: never moved back
                    continue
                take = min(need, loan.nodes - ledger.committed[(home, loan.holder)])
                if take <= 0:
                    continue
                holder = by_name.get(loan.holder)
                given = ledger.given[loan.holder]
                fast, running, saved = self._reclaims(holder, g, (given, take), wanting, affords)
                need -= take
                wanting = max(0, wanting - g * take)
                ledger.given[loan.holder] += take
                ledger.committed[(home, loan.holder)] += take
                ledger.incoming[home] += take
                if fast:
                    why = (reason, evidence)
                    moves.append(self._reclaim_move(loan.holder, home, fast, why, (running, saved, affords)))
                if take - fast:
                    moves.append(Move(TAKEBACK, loan.holder, home, home, take - fast, reason, evidence))
        return moves

    def _reclaims(
        self, holder: PoolSnapshot | None, g: int, nodes: tuple[int, int], wanting: int, affords: bool
    ) -> tuple[int, float, float]:
        """How many of the nodes taken from `holder` (`nodes`: already given by it in this call, taken now)
        to reclaim (the first ones: the idlest), the holder's GPUs running on them and the owner's waiting
        over a drain they spare. A node is reclaimed when its owner wants it now (`wanting` GPUs) and either
        the owner's wait allowance cannot absorb a drain (`affords` false) or the waiting a drain would cost
        it (the GPUs it wants x the minutes a drain takes longer) exceeds the work the requeue loses (the
        GPUs the holder runs on it x `preempt_loss_min`)."""
        p = self.params
        if len(p.takeback_waits()) < 2 or holder is None:
            return 0, 0.0, 0.0
        given, take = nodes
        fast, running, saved = 0, 0.0, 0.0
        for j in range(take):
            wanted = min(g, max(0, wanting - g * j))
            on_node = _running(holder, g, given + j + 1) - _running(holder, g, given + j)
            extra = wanted * (p.drain_min - p.reclaim_min)
            if wanted <= 0 or (affords and extra <= on_node * p.preempt_loss_min):
                break
            fast, running, saved = fast + 1, running + on_node, saved + extra
        return fast, running, saved

    def _reclaim_move(
        self,
        holder: str,
        home: str,
        nodes: int,
        why: tuple[str, tuple[Evidence, ...]],
        costs: tuple[float, float, bool],
    ) -> Move:
        """A take-back by reclaim, with what it costs the holder and spares the owner."""
        p = self.params
        running, saved, affords = costs
        reason, evidence = why
        lost = running * p.preempt_loss_min
        because = (
            f"spares the owner {saved:.0f} GPU-min of waiting over a drain"
            if affords
            else "the owner's wait allowance cannot absorb a drain"
        )
        text = (
            f"{reason}; reclaim: requeues the jobs running on the node(s) (scontrol requeue; about "
            f"{running:.0f} GPUs, {lost:.0f} GPU-min of work lost): {because}"
        )
        extra = (
            Evidence("reclaim_requeued_gpus", p.preempt_loss_min, round(running, 1), float(nodes)),
            Evidence("reclaim_lost_gpu_minutes", p.drain_min, round(lost, 1), round(saved, 1)),
        )
        return Move(RECLAIM, holder, home, home, nodes, text, evidence + extra)

    def _lends(
        self, view: ClusterView, ledger: _Ledger, recent: set[tuple[str, str]], level: float
    ) -> list[Move]:
        g = view.gpus_per_node
        promised = view.promised or {}
        planned: dict[str, int] = defaultdict(int)
        takers = [
            s
            for s in view.pools
            if ledger.away[s.name] == 0
            and s.demand_gpus > s.capacity_gpus + g * (ledger.incoming[s.name] + promised.get(s.name, 0))
        ]
        self.blocked = {}
        if not takers:
            return []
        chosen: list[_Candidate] = []
        use_cache: dict[tuple[str, int, float], float] = {}
        idle_cache: dict[tuple[str, int], tuple[float, int, int, float]] = {}
        while True:
            best: _Candidate | None = None
            for taker in takers:
                coming = ledger.incoming[taker.name] + promised.get(taker.name, 0) + planned[taker.name]
                base = taker.capacity_gpus + g * coming
                if taker.demand_gpus <= base:
                    continue
                for donor in view.pools:
                    found = self._candidate(
                        view,
                        ledger,
                        taker,
                        donor,
                        recent=recent,
                        base=base,
                        level=level,
                        caches=(use_cache, idle_cache),
                    )
                    if found is not None and (best is None or found.rank > best.rank):
                        best = found
            if best is None:
                break
            if not chosen:
                self._remember_offer(view.now_min, best.per_token)
            if best.per_token < self.token_price(level, len(view.pools), g):
                self._block(best.taker, VALUE)
                break
            if best.cost > level + 1e-9:
                self._block(best.taker, BUDGET)
                break
            chosen.append(best)
            level -= best.cost
            planned[best.taker] += 1
            ledger.given[best.donor] += 1
            if best.home != best.donor:
                ledger.committed[(best.home, best.donor)] += 1
        return self._as_moves(chosen, view)

    def _candidate(
        self,
        view: ClusterView,
        ledger: _Ledger,
        taker: PoolSnapshot,
        donor: PoolSnapshot,
        *,
        recent: set[tuple[str, str]],
        base: int,
        level: float,
        caches: tuple[
            dict[tuple[str, int, float], float], dict[tuple[str, int], tuple[float, int, int, float]]
        ],
    ) -> _Candidate | None:
        """The value of lending one more idle node of `donor` to `taker` (None: not allowed)."""
        p, g = self.params, view.gpus_per_node
        use_cache, idle_cache = caches
        if donor.name == taker.name or donor.idle_nodes - ledger.given[donor.name] <= 0:
            return None
        if (taker.name, donor.name) in recent:
            self._block(taker.name, REVERSAL)
            return None
        keep = donor.capacity_gpus - g * (ledger.given[donor.name] + 1)
        key = (donor.name, keep)
        if key not in idle_cache:
            idle, missed = donor.outlook.idle(keep)
            span = min(idle, p.history_min)
            if missed is not None:  # foreseen: its take-back comes in time but for the forecast's misses
                busy = donor.outlook.busy_minutes()
                idle_cache[key] = (span, missed, busy, p.history_min)
            else:  # the mean spacing of its rises at that level (a renewal reading); none: persistence
                rises, busy, held = donor.outlook.rises(keep, span)
                idle_cache[key] = (min(p.history_min, held / rises) if rises else span, rises, busy, held)
        loan, rises, busy, held = idle_cache[key]
        # the take-backs the donor's wait allowance absorbs: by drain, or (faster, at the holder's expense)
        # by reclaim; a loan must outlast the reversal window by the take-back's lead
        waits = [
            w
            for w in p.takeback_waits()
            if loan >= p.reversal_min + w and rises <= self.allowed_rises(donor, busy, w)
        ]
        if not waits:
            self._block(taker.name, PROTECTION)
            return None
        home = self._home_of_next(donor.name, taker.name, ledger)
        cost = 2 if home == donor.name else 1
        use_key = (taker.name, base, loan)
        if use_key not in use_cache:
            use_cache[use_key] = taker.outlook.use(base, g, loan)
        use = use_cache[use_key]
        wait = waits[0]
        if home == donor.name:  # its owner takes it back at a rise: by drain (a drain's wait) or by reclaim
            expected = min(1.0, rises * loan / held) if held > 0 else 0.0
            # the cheaper take-back; at equal cost (none expected) the drain, which kills nothing
            displaced, wait = min((self.takeback_cost(w, g, use) * expected, -w) for w in waits)
            wait = -wait
        else:  # a borrowed node cannot be recalled by its holder: what the holder would have used of it
            displaced = donor.outlook.use(keep, g, loan) * loan
        value = use * (loan - p.drain_min) - displaced
        if value <= 0:
            self._block(taker.name, VALUE)
            return None
        spread = ledger.away[donor.name] + ledger.given[donor.name]
        allowed = self.allowed_rises(donor, busy, wait)
        return _Candidate(
            value / cost,
            value,
            taker.name,
            donor.name,
            home,
            cost,
            use,
            loan,
            rises,
            allowed,
            busy,
            wait,
            spread,
        )

    def takeback_cost(self, wait: float, g: int, running: float) -> float:
        """GPU-minutes a take-back costs: the owner's wait for a node (`g` GPUs), plus, for a reclaim, the
        work lost by the `running` GPUs the holder runs on it."""
        p = self.params
        lost = running * p.preempt_loss_min if wait < p.drain_min else 0.0
        return g * wait + lost

    def allowed_rises(self, donor: PoolSnapshot, busy: int, wait: float | None = None) -> float:
        """Rises above the level it keeps that a donor's wait allowance absorbs, `busy` being its demand
        minutes over the same window: each rise costs a take-back's wait (`wait`: a drain's by default),
        and the allowance is `1 - wait_quantile` of its demand minutes. A pool sparse at that wait may have
        none (it lends nothing)."""
        wait = self.params.drain_min if wait is None else wait
        if self.sparse(donor, wait):
            return -1.0
        return (1.0 - self.params.wait_quantile) * busy / wait

    def sparse(self, pool: PoolSnapshot, wait: float | None = None) -> bool:
        """A pool with demand, but in so few of its minutes that a week of them would not absorb one
        take-back's wait (`wait`: the fastest, a reclaim's, by default) within its allowance (demand in
        less than `wait / ((1 - q) x history)` of the minutes watched: 3% for a reclaim, 11% for a drain):
        its next burst, of unknown size, would break its wait target. With a history too short for even a
        pool busy all the time to absorb that wait (compressed timings), no pool is sparse; its allowance
        then admits no rise: a donor lends only above all it showed."""
        p = self.params
        wait = p.fastest_takeback() if wait is None else wait
        if (1.0 - p.wait_quantile) * p.history_min < wait:
            return False  # a history too short to judge any pool by its allowance (compressed timings)
        busy = pool.outlook.busy_minutes()
        watched = max(1.0, min(pool.outlook.watched_min, p.history_min))
        return busy > 0 and (1.0 - p.wait_quantile) * p.history_min * min(1.0, busy / watched) < wait

    def affords_drain(self, pool: PoolSnapshot) -> bool:
        """Whether an owner's wait allowance absorbs take-backs by drain: over the history, the rises of its
        demand above the capacity it has now (each a drain's wait had its nodes been away) fit it."""
        p = self.params
        rises, busy, _ = pool.outlook.rises(pool.capacity_gpus, p.history_min)
        return rises <= self.allowed_rises(pool, busy, p.drain_min)

    def _block(self, pool: str, reason: str) -> None:
        """Remember, per waiting pool, the furthest check a candidate loan failed (diagnostics): a donor
        in the reversal window, then the donor's protection, then the value, then the budget."""
        if STAGES.index(reason) >= STAGES.index(self.blocked.get(pool, STAGES[0])):
            self.blocked[pool] = reason

    @staticmethod
    def _home_of_next(donor: str, taker: str, ledger: _Ledger) -> str:
        """Whose node the donor sends next: a borrowed one first (its return is paid), else its own."""
        for loan in sorted(ledger.held[donor], key=lambda x: x.home):
            if loan.home != taker and loan.nodes - ledger.committed[(loan.home, donor)] > 0:
                return loan.home
        return donor

    def _as_moves(self, chosen: Sequence[_Candidate], view: ClusterView) -> list[Move]:
        """One Move per (donor, taker, home), in the order first chosen, with its evidence."""
        p = self.params
        grouped: dict[tuple[str, str, str], list[_Candidate]] = {}
        for c in chosen:
            grouped.setdefault((c.donor, c.taker, c.home), []).append(c)
        budget = self.budget_left(view)
        outlooks = {pool.name: pool.outlook for pool in view.pools}
        moves: list[Move] = []
        for (donor, taker, home), items in grouped.items():
            first = items[0]
            recent = outlooks[taker].recent_weight() or 0.0
            value = sum(c.value for c in items)
            budget -= sum(c.cost for c in items)
            evidence = (
                Evidence("taker_use_rate_gpus", first.loan_min, round(first.use, 3), 0.0),
                Evidence("taker_forecast_recent_weight", p.history_min, round(recent, 3), 0.0),
                Evidence("donor_idle_min", p.history_min, round(first.loan_min, 1), p.reversal_min),
                Evidence("donor_rises", p.history_min, float(first.rises), round(first.allowed_rises, 3)),
                Evidence("donor_takeback_wait_min", first.loan_min, first.takeback_wait, p.drain_min),
                Evidence("expected_value_gpu_minutes", first.loan_min, round(value, 1), 0.0),
                Evidence("move_budget_tokens", DAY_MIN, round(budget, 2), float(first.cost)),
            )
            reason = (
                f"{taker} would use {first.use:.1f} GPUs of a node over the expected loan of "
                f"{first.loan_min:.0f} min (node idle at {donor}); worth {value:.0f} GPU-min"
            )
            if first.takeback_wait < p.drain_min:
                reason += "; its owner would reclaim it (requeue the jobs on it) rather than wait for a drain"
            moves.append(Move(LEND, donor, taker, home, len(items), reason, evidence))
        return moves


def _running(pool: PoolSnapshot, g: int, nodes: int) -> int:
    """The pool's running GPUs that no longer fit once `nodes` of its nodes are gone (its jobs packed on
    the nodes it keeps first: the idlest nodes go first)."""
    return max(0, min(g * nodes, pool.allocated_gpus - (pool.capacity_gpus - g * nodes)))


__all__: Sequence[str] = (
    "LEND",
    "RECLAIM",
    "TAKEBACK",
    "ClusterView",
    "Evidence",
    "Loan",
    "Move",
    "MoveRecord",
    "PoolSnapshot",
    "RebalanceParams",
    "RebalanceParamsError",
    "RebalancePolicy",
)
