"""What the day shuffles' gap is made of: the planner given more of the future, one piece at a time.

On a day-shuffled item (protocol items 5-10: whole days of the shared trace in a random order) the
reference plan knows every minute to come. The policy knows the past. This benchmark runs the same
planner (`RebalancePolicy`, its budget, reversal and take-back rules, the same engine and metrics) with
donor outlooks that know more than the past, in steps, and prints each step's coverage beyond static and
its gap to the reference, so the gap can be split into what each piece of knowledge is worth:

- `today`: the rest of the current day. `past`: drawn from the pool's past days at the same time of day
  (causal); `known`: the trace's own (a rise later today is foreseen, so the node comes back in time).
- `days`: the days after today, in a random order. `history`: drawn with replacement from the pool's past
  whole days within the planner's history (causal); `all`: drawn with replacement from all the trace's
  days (the day distribution known, with the days to come among them); `remaining`: exactly the trace's
  days still to come, their order unknown (the shuffle's construction: the rest of the permutation).
- `protect`: the planner's own protection kept (the donor's rises, wait allowance and sparse rule, from
  its history) instead of trusting the loan length as the hindsight diagnostic does.
- `taker`: the taker's use also from today's rest and the mean of the remaining days.

A donor's expected idle span at a level: the rest of today if no rise comes today (with `past`: a share `r`
of past days stayed quiet from this time of day, the others rose after `g` minutes on average, so
`(1 - r) g + r (rest + following)`), then the following days: drawn with replacement, `q` of them quiet
at that level, `P q / (1 - q)` minutes of quiet days before the first that rises (at its mean first rise
`f`); without replacement from `m` days of which `Q` are quiet, `P Q / (m - Q + 1) + f`. Capped at the
planner's history. A diagnostic of these stand-ins, not a strategy: only `today=past, days=history` is
causal, and it is not the policy's outlook (the policy reads rises and persistence, with protection).

    .venv/bin/python -m benchmarks.backtest_information [--only NAME ...] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from typing import Any, Literal

from benchmarks.backtest_protocol import (
    DAYS,
    DEFAULT_TRACE,
    HELD_OUT_SETS,
    HELD_OUT_UNSEEN,
)
from recommender.backtest.engine import Observation, Prepared, run
from recommender.backtest.metrics import summarize
from recommender.backtest.model import ModelParams
from recommender.backtest.report import BacktestConfig, build_report, run_strategies
from recommender.backtest.strategies import PolicyStrategy, window_steps
from recommender.backtest.targets import WITHIN_CEILING
from recommender.backtest.trace import Trace, load_trace, slice_trace
from recommender.policies.outlook import DemandHistory, Outlook
from recommender.policies.rebalance import RebalanceParams

NEVER_SPARSE = 1 << 30


@dataclass(frozen=True)
class Knowledge:
    """What the donors' outlook knows beyond the past (see the module docstring)."""

    label: str
    today: Literal["past", "known"]
    days: Literal["history", "all", "remaining"]
    protect: bool = False
    taker: bool = False


STEPS = (
    Knowledge("causal day draw", "past", "history"),
    Knowledge("the day distribution", "past", "all"),
    Knowledge("today's rest", "known", "history"),
    Knowledge("today's rest + the day distribution", "known", "all"),
    Knowledge("today's rest + the days to come (unordered)", "known", "remaining"),
    Knowledge("... with the planner's protection", "known", "remaining", protect=True),
    Knowledge("... and the taker's use the same way", "known", "remaining", taker=True),
)


def expected_following(firsts: Sequence[int], quiet: int, day: int, *, replace: bool) -> float | None:
    """Expected minutes from a day boundary until the demand first rises above a level, over days in a
    random order: `quiet` days that never rise and days that first rise at `firsts` minutes. With
    `replace`, days are drawn with replacement (None when every day is quiet: it never rises); without,
    they are the `quiet + len(firsts)` days to come (all quiet: the rest of the trace)."""
    if not firsts:
        return None if replace else float(quiet * day)
    mean_first = sum(firsts) / len(firsts)
    if replace:
        share = quiet / (quiet + len(firsts))
        return day * share / (1.0 - share) + mean_first
    return day * quiet / (len(firsts) + 1) + mean_first


class DayDrawOutlook:
    """A donor outlook for day-aligned traces that knows what `knowledge` says (the `Outlook` protocol);
    the taker's use, unless `knowledge.taker`, and the protection's figures come from the trailing
    history. `now` (a step) is set by the strategy each step."""

    def __init__(
        self,
        demand: Sequence[int],
        history: DemandHistory,
        knowledge: Knowledge,
        *,
        per_day: int,
        cap: int,
        drain: int,
    ) -> None:
        self.demand, self.history, self.knowledge = list(demand), history, knowledge
        self.per_day, self.cap, self.drain = per_day, cap, drain
        self.days = len(self.demand) // per_day
        self.running_max: list[list[int]] = []  # per day: the max of the demand so far that day
        for d in range(self.days):
            top, row = -1, []
            for value in self.demand[d * per_day : (d + 1) * per_day]:
                top = max(top, value)
                row.append(top)
            self.running_max.append(row)
        self.now = 0

    def _day_set(self, today: int) -> list[int]:
        days = self.knowledge.days
        if days == "remaining":
            return list(range(today + 1, self.days))
        if days == "all":
            return list(range(self.days))
        return self._past_days(today)

    def _past_days(self, today: int) -> list[int]:
        return list(range(max(0, today - self.cap // self.per_day), today))

    def _following(self, today: int, level: int) -> float:
        quiet, firsts = 0, []
        for d in self._day_set(today):
            row = self.running_max[d]
            if row[-1] <= level:
                quiet += 1
            else:
                firsts.append(bisect_right(row, level))
        following = expected_following(
            firsts, quiet, self.per_day, replace=self.knowledge.days != "remaining"
        )
        return float(self.cap) if following is None else following

    def _rest_of_today(self, level: int) -> float | None:
        """Steps until the demand rises above `level` later today (None: it does not today)."""
        end = min(len(self.demand), (self.now // self.per_day + 1) * self.per_day)
        for t in range(self.now + 1, end):
            if self.demand[t] > level:
                return float(t - self.now)
        return None

    def expected_idle(self, level: int) -> tuple[float, bool]:
        """The expected idle span at `level` and whether a rise today is foreseen exactly."""
        today, tau = divmod(self.now, self.per_day)
        rest = self.per_day - tau
        if self.knowledge.today == "known":
            soon = self._rest_of_today(level)
            if soon is not None:
                return soon, True
            return min(float(self.cap), rest + self._following(today, level)), False
        quiet, firsts = 0, []
        for d in self._past_days(today):
            seg = self.demand[d * self.per_day + tau : (d + 1) * self.per_day]
            first = next((i for i, v in enumerate(seg) if v > level), None)
            if first is None:
                quiet += 1
            else:
                firsts.append(first)
        after = rest + self._following(today, level)
        if not quiet and not firsts:
            return min(float(self.cap), after), False
        share = quiet / (quiet + len(firsts))
        rise = sum(firsts) / len(firsts) if firsts else 0.0
        return min(float(self.cap), (1.0 - share) * rise + share * after), False

    def idle(self, level: int) -> tuple[float, int | None]:
        span, foreseen = self.expected_idle(level)
        span = max(1.0, span)
        if self.knowledge.protect and not foreseen:
            return span, None  # the planner reads rises over this span: `rises` spaces them across it
        return span, 0

    def rises(self, level: int, horizon_min: float) -> tuple[int, int, float]:
        """With `protect`, the history's rises and demand minutes, over `horizon_min` (the span `idle`
        gave the planner) rather than the window they were counted in, so that the loan is that span."""
        if not self.knowledge.protect:
            return 0, NEVER_SPARSE, float(self.cap)
        rises, busy, held = self.history.rises(level, horizon_min)
        return (rises, busy, horizon_min * rises) if rises else (0, busy, held)

    def use(self, level: int, width: int, horizon_min: float) -> float:
        if not self.knowledge.taker:
            return self.history.use(level, width, horizon_min)
        start = self.now + self.drain
        end = min(len(self.demand), self.now + min(self.per_day, max(1, round(horizon_min))))
        if end <= start:
            return 0.0
        today = self.now // self.per_day
        boundary = (today + 1) * self.per_day
        served: float = sum(min(width, max(0, v - level)) for v in self.demand[start : min(end, boundary)])
        later = list(range(today + 1, self.days))
        if end > boundary and later:
            lo, hi = max(start, boundary) - boundary, end - boundary
            rows = (self.demand[d * self.per_day + lo : d * self.per_day + hi] for d in later)
            served += sum(min(width, max(0, v - level)) for row in rows for v in row) / len(later)
        return served / (end - start)

    def busy_minutes(self) -> int:
        return self.history.busy_minutes() if self.knowledge.protect else NEVER_SPARSE

    @property
    def watched_min(self) -> float:
        return self.history.watched_min if self.knowledge.protect else float(NEVER_SPARSE)

    def demand_soon(self) -> int:
        if self.knowledge.today != "known":
            return self.history.demand_soon()
        end = min(len(self.demand), (self.now // self.per_day + 1) * self.per_day, self.now + self.drain + 1)
        return max(self.demand[self.now + 1 : end], default=0)

    def recent_weight(self) -> float | None:
        return None if self.knowledge.taker else self.history.recent_weight()


class InformedStrategy(PolicyStrategy):
    """The planner with `DayDrawOutlook`s: same budget, reversal and take-back rules."""

    name = "informed"

    def __init__(
        self, prepared: Prepared, params: RebalanceParams, model_params: ModelParams, knowledge: Knowledge
    ) -> None:
        self.knowledge = knowledge
        super().__init__(prepared, params, model_params)

    def _outlooks(self, prepared: Prepared, model_params: ModelParams) -> list[Outlook]:
        super()._outlooks(prepared, model_params)  # the trailing histories, fed by `_observe`
        p, dt = self.params, self.dt
        per_day = round(1440 / dt)
        self.informed = [
            DayDrawOutlook(
                series,
                history,
                self.knowledge,
                per_day=per_day,
                cap=window_steps(p.history_min, dt),
                drain=window_steps(p.drain_min, dt),
            )
            for series, history in zip(prepared.demand, self.histories, strict=True)
        ]
        return list(self.informed)

    def _observe(self, step: int, obs: Observation) -> None:
        super()._observe(step, obs)
        for outlook in self.informed:
            outlook.now = step


def shuffle_items(base: Trace) -> list[tuple[str, Trace, int]]:
    """The day-shuffled items of the held-out sets already run (development data), scored whole; the
    current round's set (`HELD_OUT_UNSEEN`) is left out."""
    out: list[tuple[str, Trace, int]] = []
    for flag, make, _ in HELD_OUT_SETS:
        if flag not in HELD_OUT_UNSEEN:
            out += [item for item in make(base) if "days shuffled" in item[0]]
    return out


def score_item(item: tuple[str, Trace, int]) -> dict[str, Any]:
    """The reference plan, the policy and every knowledge step on one item (coverage beyond static etc.)."""
    name, trace, first = item
    config = BacktestConfig()
    runs = run_strategies(trace, config, first, trace.steps, only=("policy", "reference"))
    report = build_report(trace, config, runs, first, trace.steps)
    prepared, static = Prepared.of(trace, config.model.gpus_per_node), runs.results["static"]
    steps = {}
    for knowledge in STEPS:
        strategy = InformedStrategy(prepared, config.policy, config.model, knowledge)
        steps[knowledge.label] = summarize(run(prepared, strategy, config.model, first, trace.steps), static)
    return {"name": name, "reference": report["reference"], "policy": report["policy"], "steps": steps}


def summary_rows(scored: Sequence[dict[str, Any]]) -> list[tuple[str, float, int, float, float, float]]:
    """Per strategy: mean gap to the reference (points), items within WITHIN_CEILING of it, the most
    moves per pool-day, the worst p95 and p99 ratios."""
    rows = []
    labels = ["policy", *(k.label for k in STEPS)]
    for label in labels:
        figures = [s["policy"] if label == "policy" else s["steps"][label] for s in scored]
        gaps = [
            s["reference"]["coverage_beyond_static"] - f["coverage_beyond_static"]
            for s, f in zip(scored, figures, strict=True)
        ]
        rows.append(
            (
                label,
                100 * sum(gaps) / len(gaps),
                sum(g <= WITHIN_CEILING + 1e-9 for g in gaps),
                max(f["moves_per_pool_day"] for f in figures),
                max(f["worst_pool_p95_wait_ratio_vs_static"] for f in figures),
                max(f["worst_pool_p99_wait_ratio_vs_static"] for f in figures),
            )
        )
    return rows


def main(argv: list[str]) -> int:
    """Score every day-shuffled development item under every knowledge step; print the items and a summary."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", default=[], help="run only items whose name contains this")
    parser.add_argument("--jobs", type=int, default=2, help="items scored in parallel (default 2)")
    args = parser.parse_args(argv)
    source = load_trace(DEFAULT_TRACE)
    base = slice_trace(source, 0, min(source.steps, DAYS * round(1440 / source.step_min)))
    chosen = [x for x in shuffle_items(base) if not args.only or any(o in x[0] for o in args.only)]
    if not chosen:
        print("no item matches", file=sys.stderr)
        return 2
    with Pool(max(1, args.jobs)) as pool:
        scored = pool.map(score_item, chosen, chunksize=1)
    labels = ["policy", *(k.label for k in STEPS)]
    print("coverage beyond static per item (reference first, then the policy and each knowledge step)")
    for s in scored:
        cells = [s["policy"] if label == "policy" else s["steps"][label] for label in labels]
        row = " ".join(f"{c['coverage_beyond_static']:.3f}" for c in cells)
        print(f"  {s['name']:<52} ref {s['reference']['coverage_beyond_static']:.3f} | {row}")
    print(f"\n{len(scored)} items; gap = reference minus strategy, coverage beyond static, in points")
    print(f"  {'strategy':<46} {'mean gap':>8} {'within 10':>9} {'moves/pd':>8} {'p95':>5} {'p99':>5}")
    for label, gap, within, moves, p95, p99 in summary_rows(scored):
        print(f"  {label:<46} {gap:8.1f} {within:>5} of {len(scored):<2} {moves:8.3f} {p95:5.2f} {p99:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
