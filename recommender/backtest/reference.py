"""The budgeted reference plan: a hindsight greedy of long single-node loans, replayed through the engine.

A **loan** lends one home node of a donor D to a taker T: decided at minute s (the node leaves D at once
and serves T from s + 1 + drain), returned at minute e (it serves D again from e + 1 + drain), or never
returned when it runs to the end of the horizon. A loan is allowed when, from the trace's future:

- the donor does not need the node while it is away: D's demand stays within its capacity minus that
  node over every minute of [s + 1, e + drain] (so no donor waits more than under static), and D has a
  home node at home throughout;
- the pools keep their roles over the loan (a donor does not borrow, a taker does not lend);
- the loan lasts longer than the reversal window, and no pair of pools exchanges nodes both ways within
  it;
- the move budget allows it: the policy's token bucket (`moves_per_pool_day x pools` tokens a day, at
  most one day's worth, empty at the start, so the future's budget is never spent), 2 tokens for every
  lend from home (its return prepaid, as the policy pays: the trace's end is not the deployment's, so a
  loan still open there returns later); and the moves in the scored window stay within
  `moves_per_pool_day` per pool-day. With `Budget.prepaid_end` off (the second and third rounds'
  reference, `ref_open_end`), a loan that runs to the end pays 1: it spends hindsight of the horizon.

Its **value** is what T's demand above T's capacity (and the loans it already has) would use of the
node, in the scored window, one node at most per minute. Candidates are the donors' maximal runs of
spare capacity, trimmed to the taker's need (or kept to the end: one move in the window, not two); they
are picked greedily by value per move (lazily re-valued as loans are committed: values only fall), a
candidate whose lend the bucket cannot pay yet starts later. The plan is then replayed through the
engine like any strategy (`PlanStrategy`), so its figures come from the same model and metrics.

This is a **reference**, not a bound: a greedy with perfect knowledge, whose choices another plan could
beat (the upper bound at the same budget is `recommender/backtest/bound.py`).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from recommender.backtest.engine import Observation, Prepared
from recommender.backtest.model import LEND, RECLAIM, TAKEBACK, ModelParams, NodeMove

DAY_MIN = 1440.0


@dataclass(frozen=True, slots=True)
class Budget:
    """The move budget the reference obeys (steps of the trace)."""

    moves_per_pool_day: float
    reversal_steps: int
    prepaid_end: bool = True  # a loan open at the trace's end still pays its return (the policy's rule)

    def rate(self, pools: int, step_min: float) -> float:
        """Tokens per step."""
        return self.moves_per_pool_day * pools * step_min / DAY_MIN

    def capacity(self, pools: int) -> float:
        """Tokens the bucket holds at most: one day's worth, at least one lend from home (2)."""
        return max(2.0, self.moves_per_pool_day * pools)


@dataclass(frozen=True, slots=True)
class PlannedLoan:
    """One node of `donor` serves `taker`: lent at step `start`, returned at `end` (None: never)."""

    donor: int
    taker: int
    start: int
    end: int | None
    value: float
    reclaimed: bool = False  # returned by reclaim (home after the reclaim delay), else by drain


@dataclass(order=True)
class _Cand:
    key: float
    donor: int
    taker: int
    lo: int  # the window the candidate came from: decision steps [lo, hi]
    hi: int
    to_end: bool  # the donor's run reaches the horizon: the loan may stay to the end


class ReferencePlanner:
    """Builds the reference plan for one trace (see the module docstring)."""

    def __init__(
        self, prepared: Prepared, model: ModelParams, budget: Budget, first: int = 0, stop: int | None = None
    ) -> None:
        trace = prepared.trace
        self.n, self.g = len(trace.pools), model.gpus_per_node
        self.horizon = trace.steps if stop is None else min(stop, trace.steps)
        self.first = first
        self.drain = math.ceil(model.drain_delay_min / trace.step_min - 1e-9)
        self.reclaim = min(self.drain, math.ceil(model.reclaim_delay_min / trace.step_min - 1e-9))
        self.loss_steps = model.preempt_loss_min / trace.step_min
        self.budget = budget
        self.rate = budget.rate(self.n, trace.step_min)
        self.cap = budget.capacity(self.n)
        scored_days = max(0, self.horizon - first) * trace.step_min / DAY_MIN
        self.scored_moves = math.floor(budget.moves_per_pool_day * self.n * scored_days + 1e-9)
        h = self.horizon
        self.demand = [row[:h] for row in prepared.demand]
        self.capacity = [row[:h] for row in trace.capacity]
        self.home = list(prepared.home_nodes)
        self.inn = [[0] * h for _ in range(self.n)]  # foreign nodes serving the pool
        self.out = [[0] * h for _ in range(self.n)]  # own nodes away (in transit included)
        self.giving = [[0] * h for _ in range(self.n)]  # loans where the pool is the donor
        self.taking = [[0] * h for _ in range(self.n)]  # loans where the pool is the taker
        self.bad: list[list[int]] = [[] for _ in range(self.n)]  # prefix count of steps it cannot lend
        self.gain: list[list[int]] = [[] for _ in range(self.n)]  # prefix sum of one more node's use
        self.nxt: list[list[int]] = [[] for _ in range(self.n)]  # next step >= t it could use a node
        self.prv: list[list[int]] = [[] for _ in range(self.n)]  # last step <= t it could use a node
        for p in range(self.n):
            self._refresh_donor(p)
            self._refresh_taker(p)
        self.tokens: list[tuple[int, int]] = []  # (step, tokens) paid, sorted
        self.scored: int = 0  # moves in the scored window
        self.pair_moves: dict[tuple[int, int], list[int]] = defaultdict(list)  # (src, dst) -> steps
        self.loans: list[PlannedLoan] = []

    # --- per-pool arrays ------------------------------------------------------------------------------

    def _refresh_donor(self, p: int) -> None:
        d, k, out, taking, g, home = (
            self.demand[p],
            self.capacity[p],
            self.out[p],
            self.taking[p],
            self.g,
            self.home[p],
        )
        bad, acc = [0], 0
        for t in range(self.horizon):
            if taking[t] or out[t] + 1 > home or d[t] + g * (out[t] + 1) > k[t]:
                acc += 1
            bad.append(acc)
        self.bad[p] = bad

    def _refresh_taker(self, p: int) -> None:
        d, k, inn, giving, g = self.demand[p], self.capacity[p], self.inn[p], self.giving[p], self.g
        h = self.horizon
        gain, acc = [0], 0
        use = [0] * h
        for t in range(self.first, h):
            if not giving[t]:
                short = d[t] - k[t] - g * inn[t]
                if short > 0:
                    use[t] = short if short < g else g
        for t in range(h):
            acc += use[t]
            gain.append(acc)
        nxt, nearest = [h] * (h + 1), h
        for t in range(h - 1, -1, -1):
            if use[t]:
                nearest = t
            nxt[t] = nearest
        prv, nearest = [-1] * h, -1
        for t in range(h):
            if use[t]:
                nearest = t
            prv[t] = nearest
        self.gain[p], self.nxt[p], self.prv[p] = gain, nxt, prv

    # --- candidates -----------------------------------------------------------------------------------

    def _away(self, s: int, e: int | None, back: int) -> tuple[int, int]:
        """Steps [a, b) the donor lacks the node for a loan decided at s and returned at e (home `back`
        steps after the return's decision step)."""
        b = self.horizon if e is None else min(self.horizon, e + 1 + back)
        return min(self.horizon, s + 1), b

    def _serves(self, s: int, e: int | None) -> tuple[int, int]:
        """Steps [a, b) the node serves the taker."""
        b = self.horizon if e is None else min(self.horizon, e + 1)
        return min(self.horizon, s + 1 + self.drain), b

    def _use(self, taker: int, t: int) -> int:
        """What one more node serves the taker at step t (0 outside the horizon)."""
        gain = self.gain[taker]
        return gain[t + 1] - gain[t] if 0 <= t < self.horizon else 0

    def _shape(self, c: _Cand) -> tuple[int, int | None, float, int, int] | None:
        """The best loan inside a candidate's window now: (start, end, value, tokens, return delay), None if
        worthless. A loan that returns does so by reclaim (home after the reclaim delay; the taker's work
        on the node then, if any, is requeued and its loss counted against the value) or by drain (home
        after the drain delay, so returned that much earlier; nothing lost), whichever is worth more."""
        taker = c.taker
        first_use = self.nxt[taker][min(self.horizon, c.lo + 1 + self.drain)]
        last_step = self.horizon - 1 if c.to_end else c.hi
        if first_use >= self.horizon or first_use > last_step:
            return None
        start = max(c.lo, first_use - 1 - self.drain)
        if c.to_end:
            a, b = self._serves(start, None)
            value = float(self.gain[taker][b] - self.gain[taker][a]) if b > a else 0.0
            tokens = 2 if self.budget.prepaid_end else 1
            return (start, None, value, tokens, self.drain) if value > 0 else None
        best: tuple[int, int | None, float, int, int] | None = None
        best_net = 0.0
        reversal = self.budget.reversal_steps
        for back in sorted({self.reclaim, self.drain}):
            hi = c.hi - (back - self.reclaim)  # c.hi: the last return step by reclaim
            last_use = self.prv[taker][hi] if hi >= 0 else -1
            if last_use < first_use:
                continue
            s = start
            # returned the minute after its last use (nothing to requeue), or at the window's end
            end = max(min(last_use + 1, hi), s + reversal + 1)
            if end > hi:
                s = max(c.lo, hi - reversal - 1)
                end = hi
                if end - s <= reversal:
                    continue
            a, b = self._serves(s, end)
            value = float(self.gain[taker][b] - self.gain[taker][a]) if b > a else 0.0
            lost = self._use(taker, end) * self.loss_steps if back < self.drain else 0.0
            if value > 0 and value - lost > best_net:
                best, best_net = (s, end, value - lost, 2, back), value - lost
        return best

    def _valid_runs(self, c: _Cand) -> list[tuple[int, int, bool]]:
        """Sub-windows of a candidate's window where the loan is still allowed now (donor spare, roles)."""
        d, t = c.donor, c.taker
        bad, taking = self.bad[d], self.giving[t]
        h = self.horizon
        lo_step = min(h, c.lo + 1)
        hi_step = h if c.to_end else min(h, c.hi + 1 + self.reclaim)
        runs: list[tuple[int, int, bool]] = []
        start: int | None = None
        for x in range(lo_step, hi_step + 1):
            ok = x < hi_step and bad[x + 1] - bad[x] == 0 and not taking[x]
            if ok and start is None:
                start = x
            elif not ok and start is not None:
                reaches_end = c.to_end and x == h
                lo = start - 1
                hi = h - 1 if reaches_end else x - 1 - self.reclaim
                if hi - lo > self.budget.reversal_steps:
                    runs.append((lo, hi, reaches_end))
                start = None
        return runs

    def _still_valid(self, c: _Cand, s: int, e: int | None, back: int) -> bool:
        a, b = self._away(s, e, back)
        if self.bad[c.donor][b] - self.bad[c.donor][a]:
            return False
        taking = self.giving[c.taker]
        return not any(taking[x] for x in range(a, b))

    # --- budget and reversals -------------------------------------------------------------------------

    def _affordable(self, s: int, tokens: int, moves_in_window: int) -> bool:
        """Whether paying `tokens` at step s keeps the bucket >= 0 at every payment (and the scored
        moves within the target)."""
        if self.scored + moves_in_window > self.scored_moves:
            return False
        level, last = 0.0, 0
        pays = list(self.tokens)
        heapq.heappush(pays, (s, tokens))
        for step, cost in sorted(pays):
            level = min(self.cap, level + self.rate * (step - last))
            last = step
            level -= cost
            if level < -1e-9:
                return False
        return True

    def _reverses(self, src: int, dst: int, step: int) -> bool:
        """A move src->dst at `step` would be a reversal of a dst->src move within the window."""
        window = self.budget.reversal_steps
        return any(abs(step - x) <= window for x in self.pair_moves[(dst, src)])

    def _moves_in_window(self, s: int, e: int | None) -> int:
        inside = int(self.first <= s < self.horizon)
        if e is not None:
            inside += int(self.first <= e < self.horizon)
        return inside

    # --- the greedy -----------------------------------------------------------------------------------

    def _seed(self) -> list[_Cand]:
        heap: list[_Cand] = []
        h = self.horizon
        for donor in range(self.n):
            if self.home[donor] <= 0:
                continue
            whole = _Cand(0.0, donor, donor, -1, h - 1, True)
            for lo, hi, to_end in self._valid_runs(whole):
                for taker in range(self.n):
                    if taker == donor or self.home[taker] < 0:
                        continue
                    self._push(heap, _Cand(0.0, donor, taker, max(0, lo), hi, to_end))
        return heap

    def _push(self, heap: list[_Cand], c: _Cand) -> None:
        shaped = self._shape(c)
        if shaped is None:
            return
        _, _, value, tokens, _ = shaped
        c.key = -value / tokens
        heapq.heappush(heap, c)

    def plan(self) -> list[PlannedLoan]:
        """Pick loans greedily by value per move; return them in the order picked."""
        heap = self._seed()
        while heap:
            c = heapq.heappop(heap)
            shaped = self._shape(c)
            if shaped is None:
                continue
            s, e, value, tokens, back = shaped
            if not self._still_valid(c, s, e, back):
                for lo, hi, to_end in self._valid_runs(c):
                    self._push(heap, _Cand(0.0, c.donor, c.taker, max(c.lo, lo), min(c.hi, hi), to_end))
                continue
            key = -value / tokens
            if heap and key > heap[0].key + 1e-9:  # worth less than it was: back in line
                c.key = key
                heapq.heappush(heap, c)
                continue
            if self._reverses(c.donor, c.taker, s) or (e is not None and self._reverses(c.taker, c.donor, e)):
                continue
            window_moves = self._moves_in_window(s, e)
            if not self._affordable(s, tokens, window_moves):
                later = self._first_affordable(c, s, e, tokens)
                if later is not None:
                    self._push(heap, _Cand(0.0, c.donor, c.taker, later, c.hi, c.to_end))
                continue
            self._commit(c, s, e, value, (tokens, window_moves, back))
            heapq.heappush(heap, _Cand(c.key, c.donor, c.taker, c.lo, c.hi, c.to_end))
        return self.loans

    def _first_affordable(self, c: _Cand, s: int, e: int | None, tokens: int) -> int | None:
        """The first decision step after `s` at which the bucket pays the lend (None: none before the
        loan would be too short)."""
        last = (self.horizon - 1 if e is None else e) - self.budget.reversal_steps - 1
        lo, hi = s + 1, last
        if lo > hi or not self._affordable(hi, tokens, self._moves_in_window(hi, e)):
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            if self._affordable(mid, tokens, self._moves_in_window(mid, e)):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _commit(self, c: _Cand, s: int, e: int | None, value: float, paid: tuple[int, int, int]) -> None:
        tokens, window_moves, back = paid
        donor, taker = c.donor, c.taker
        a, b = self._away(s, e, back)
        for x in range(a, b):
            self.out[donor][x] += 1
        a, b = self._serves(s, e)
        for x in range(a, b):
            self.inn[taker][x] += 1
        role_end = self.horizon if e is None else min(self.horizon, e + 1 + back)
        for x in range(s, role_end):
            self.giving[donor][x] += 1
            self.taking[taker][x] += 1
        heapq.heappush(self.tokens, (s, tokens))
        self.scored += window_moves
        self.pair_moves[(donor, taker)].append(s)
        if e is not None:
            self.pair_moves[(taker, donor)].append(e)
        self.loans.append(PlannedLoan(donor, taker, s, e, value, back < self.drain))
        for p in (donor, taker):
            self._refresh_donor(p)
            self._refresh_taker(p)


def reference_plan(
    prepared: Prepared, model: ModelParams, budget: Budget, first: int = 0, stop: int | None = None
) -> list[PlannedLoan]:
    """The greedy plan of single-node loans for a trace."""
    return ReferencePlanner(prepared, model, budget, first, stop).plan()


class PlanStrategy:
    """Replays a fixed plan of loans: each lend at its start step, each return at its end step."""

    name = "reference"

    def __init__(self, loans: Sequence[PlannedLoan]) -> None:
        self.at: dict[int, list[NodeMove]] = defaultdict(list)
        merged: dict[tuple[int, int, int, int, str], int] = defaultdict(int)
        for loan in loans:
            merged[(loan.start, loan.donor, loan.taker, loan.donor, LEND)] += 1
            if loan.end is not None:
                kind = RECLAIM if loan.reclaimed else TAKEBACK
                merged[(loan.end, loan.taker, loan.donor, loan.donor, kind)] += 1
        for (step, src, dst, home, kind), nodes in sorted(merged.items()):
            self.at[step].append(NodeMove(src, dst, home, nodes, kind))
        # returns before lends at the same step: a node back home may leave again
        for moves in self.at.values():
            moves.sort(key=lambda m: m.kind == LEND)

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """The moves planned for this step."""
        return self.at.get(step, ())
