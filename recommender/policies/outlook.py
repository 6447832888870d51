"""What the planner knows about one pool's demand: its trailing history, read as a forecast.

The planner asks these questions of a pool, about a demand level in GPUs:

- as a **taker**, `use(level, width, horizon)`: how many GPUs above `level` (at most `width`, one node)
  it will want per minute over the next `horizon` minutes, i.e. what one more node would serve. The
  forecast is **persistence at the loan's own scale**: the same quantity over the trailing window of about
  that length (the last hour for a loan of an hour, the last day for a day, the week for days), so a pool
  that queues for long stretches is worth a long loan even when its queue dipped a minute ago. Where the
  pool's **time-of-day profile** forecasts better than persistence (`recommender/policies/profile.py`
  checks it on the days already seen), the profile's forecast is used instead; else, beyond the last
  hour, the window's forecast is blended with the last hour's by how well each forecast the pool's next day
  so far (`recommender/policies/skill.py`);
- as a **donor**, `idle(level)`: how long its demand is expected to stay at or below `level`: until a
  calibrated profile expects it above (foreseen: a take-back can then be made in time, `demand_soon`),
  else as long as it already has (persistence); `rises(level, horizon)`: how often its demand rose above
  `level` over the shortest trailing window that covers the idle span (a dip shorter than `gap_min`, the
  drain, is not a new rise: a node recalled at the first rise is still on its way), each rise being a
  take-back and a drain's wait had the node been lent, with the demand minutes of that window, which the
  wait target is a share of; and `busy_minutes()`, its demand minutes over the whole history (a pool with
  too few is sparse).

`DemandHistory` answers from the trailing samples only (the live recommender and the backtest's policy);
the backtest's hindsight planner answers the same questions from the future instead.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable
from typing import Protocol

from recommender.policies.profile import DailyProfile
from recommender.policies.skill import ForecastSkill

DAY_MIN = 1440.0


class Outlook(Protocol):
    """A pool's demand as the planner reads it (minutes, GPUs)."""

    def use(self, level: int, width: int, horizon_min: float) -> float:
        """Expected GPUs above `level`, clipped to `width`, per minute over the next `horizon_min`."""
        ...

    def idle(self, level: int) -> tuple[float, int | None]:
        """Minutes the demand is expected to stay at or below `level`; and, when a calibrated forecast
        foresees when it rises (so a take-back can be made in time), how many rises above `level` that
        forecast missed over the history window (None: not foreseen, persistence)."""
        ...

    def rises(self, level: int, horizon_min: float) -> tuple[int, int, float]:
        """Over the shortest trailing window that covers `horizon_min`: times the demand rose above
        `level`, minutes with demand, and the minutes the window holds."""
        ...

    def busy_minutes(self) -> int:
        """Minutes with demand over the history window."""
        ...

    @property
    def watched_min(self) -> float:
        """Minutes of history held."""
        ...

    def demand_soon(self) -> int:
        """The demand expected before a node recalled now could arrive (0: no such forecast; a trailing
        history has one only from a calibrated profile, the hindsight planner from the future)."""
        ...

    def recent_weight(self) -> float | None:
        """The weight of the last hour's view in `use` beyond the hour, from the forecasts' skill so far
        (None: not blended)."""
        ...


class _Window:
    """The samples of the last `span` minutes with a count of each demand value, and the rises of the
    demand's gap max in that time with a count per level."""

    __slots__ = ("counts", "rise_counts", "rise_events", "samples", "span")

    def __init__(self, span: float) -> None:
        self.span = span
        self.samples: deque[tuple[float, int]] = deque()
        self.counts: list[int] = [0]
        self.rise_events: deque[tuple[float, int, int]] = deque()  # (minute, from, to)
        self.rise_counts: list[int] = [0]  # level -> rises above it in the window

    def push(self, minute: float, demand: int, rise: tuple[int, int] | None) -> None:
        counts = self.counts
        if demand >= len(counts):
            counts.extend([0] * (demand + 1 - len(counts)))
        counts[demand] += 1
        self.samples.append((minute, demand))
        old = minute - self.span
        while self.samples[0][0] <= old:
            counts[self.samples.popleft()[1]] -= 1
        if rise is not None:
            self.rise_events.append((minute, *rise))
            self._count(*rise, +1)
        events = self.rise_events
        while events and events[0][0] <= old:
            _, low, high = events.popleft()
            self._count(low, high, -1)

    def _count(self, low: int, high: int, sign: int) -> None:
        rises = self.rise_counts
        if high > len(rises):
            rises.extend([0] * (high - len(rises)))
        for level in range(low, high):
            rises[level] += sign

    def rises(self, level: int) -> int:
        """Rises above `level` in the window."""
        return self.rise_counts[level] if 0 <= level < len(self.rise_counts) else 0

    def busy(self) -> int:
        """Minutes with demand: samples with demand times the mean interval between samples."""
        n = len(self.samples)
        if n < 2:
            return n - self.counts[0]
        return round((n - self.counts[0]) * (self.held_min() - 1) / (n - 1))

    def held_min(self) -> float:
        """Minutes the window holds (its span once full)."""
        return self.samples[-1][0] - self.samples[0][0] + 1 if self.samples else 0.0

    def mean(self) -> float:
        """Mean demand over the window."""
        n = len(self.samples)
        return sum(v * c for v, c in enumerate(self.counts)) / n if n else 0.0

    def use(self, level: int, width: int) -> float:
        """Mean over the window of min(width, max(0, demand - level))."""
        n = len(self.samples)
        if not n:
            return 0.0
        counts = self.counts
        top = level + width
        total = sum((v - level) * counts[v] for v in range(max(0, level + 1), min(top, len(counts))))
        if top < len(counts):
            total += width * sum(counts[max(0, top) :])
        return total / n


class DemandHistory:
    """Trailing demand samples of one pool, with the aggregates the planner reads kept incrementally.

    `push(minute, demand)` in time order. `window_min`: the history (idle spans, rises, busy minutes, the
    longest persistence window, the profile's days); `recent_min`: the shortest persistence window and
    the profile's slot; `gap_min`: what ends a rise. Persistence windows: `recent_min`, a day and
    `window_min` (those shorter than the history).
    """

    __slots__ = (
        "_above",
        "_gap",
        "first",
        "gap_min",
        "now",
        "profile",
        "recent_min",
        "skill",
        "window_min",
        "windows",
    )

    def __init__(self, window_min: float, recent_min: float, gap_min: float, *, profile: bool = True) -> None:
        self.window_min, self.recent_min, self.gap_min = window_min, recent_min, gap_min
        spans = sorted({recent_min, min(DAY_MIN, window_min), window_min})
        self.windows = [_Window(s) for s in spans]
        self._gap: deque[tuple[float, int]] = deque()  # sliding max of demand over gap_min
        self._above: list[tuple[float, int]] = []  # demand strictly decreasing: last time demand > y
        self.profile = DailyProfile(recent_min, window_min) if profile else None
        self.skill = ForecastSkill(recent_min, DAY_MIN, window_min)
        self.first: float | None = None
        self.now: float | None = None

    @classmethod
    def from_samples(
        cls, samples: Iterable[tuple[float, int]], window_min: float, recent_min: float, gap_min: float
    ) -> DemandHistory:
        """A history fed with (minute, demand) samples, oldest first."""
        out = cls(window_min, recent_min, gap_min)
        for minute, demand in samples:
            out.push(minute, demand)
        return out

    def push(self, minute: float, demand: int) -> None:
        """Add the demand seen at `minute` (not earlier than the last sample)."""
        demand = max(0, int(demand))
        self.first = minute if self.first is None else self.first
        self.now = minute
        gap = self._gap
        before = gap[0][1] if gap else 0
        while gap and gap[-1][1] <= demand:
            gap.pop()
        gap.append((minute, demand))
        while gap[0][0] <= minute - self.gap_min:
            gap.popleft()
        after = gap[0][1]
        rise = (before, after) if after > before else None
        for window in self.windows:
            window.push(minute, demand, rise)
        old = minute - self.window_min
        self.first = max(self.first, self.windows[-1].samples[0][0])
        _push_decreasing(self._above, minute, demand, old=old)
        if self.profile is not None:
            self.profile.push(minute, demand)
        self.skill.push(minute, demand)
        if self.skill.due(minute):
            self.skill.record(minute, self.window_for(self.skill.horizon).mean(), self.windows[0].mean())

    @property
    def watched_min(self) -> float:
        """Minutes of history held (0 before two samples)."""
        return 0.0 if self.first is None or self.now is None else self.now - self.first

    def demand_now(self) -> int:
        """The newest sample (0 with none)."""
        samples = self.windows[0].samples
        return samples[-1][1] if samples else 0

    def window_for(self, horizon_min: float) -> _Window:
        """The persistence window for a horizon: the one closest to it on a log scale."""
        h = max(horizon_min, 1.0)
        return min(self.windows, key=lambda w: abs(math.log(w.span / h)))

    def use(self, level: int, width: int, horizon_min: float) -> float:
        """See `Outlook.use`: the profile's forecast where it beats persistence at that horizon, else the
        trailing window's mean."""
        if self.profile is not None and self.now is not None:
            profiled = self.profile.use(self.now, level, width, horizon_min)
            if profiled is not None:
                return profiled
        return self.persistence_use(level, width, horizon_min)

    def persistence_use(self, level: int, width: int, horizon_min: float) -> float:
        """`use` from the trailing window closest to the horizon; beyond the recent window, blended with the
        recent window's by how well each has forecast this pool's next day so far (`ForecastSkill`)."""
        forecast = self.window_for(horizon_min).use(level, width)
        weights = self.skill.weights()
        if weights is None or horizon_min <= self.recent_min:
            return forecast
        at_scale, recent = weights
        return at_scale * forecast + recent * self.windows[0].use(level, width)

    def idle(self, level: int) -> tuple[float, int | None]:
        """See `Outlook.idle`: until a calibrated profile expects the demand above `level` within the next
        day (foreseen, with the profile's misses at that level), else the time since it last exceeded
        `level` (persistence)."""
        if self.profile is not None and self.now is not None:
            due = self.profile.due(self.now, level, DAY_MIN)
            if due is not None:
                return due, self.profile.misses(level)
        return self.idle_so_far(level), None

    def idle_so_far(self, level: int) -> float:
        """Minutes since the demand last exceeded `level` (all it has seen if never)."""
        if self.now is None:
            return 0.0
        keys = [-d for _, d in self._above]  # demand decreasing along the stack
        i = bisect_left(keys, -level)  # entries with demand > level come first
        since = self._above[i - 1][0] if i else (self.first if self.first is not None else self.now)
        return self.now - since

    def rises(self, level: int, horizon_min: float) -> tuple[int, int, float]:
        """See `Outlook.rises`: over the shortest window that covers `horizon_min` (the idle span it vouches
        for; the history if none does)."""
        window = next((w for w in self.windows if w.span >= horizon_min), self.windows[-1])
        return window.rises(level), window.busy(), window.held_min()

    def busy_minutes(self) -> int:
        """Minutes with demand in the history window."""
        return self.windows[-1].busy()

    def recent_weight(self) -> float | None:
        """See `Outlook.recent_weight` (`ForecastSkill`; a calibrated profile, where it forecasts, is not
        blended)."""
        weights = self.skill.weights()
        return None if weights is None else weights[1]

    def demand_soon(self) -> int:
        """See `Outlook.demand_soon`: the profile's peak of the next slot when it starts within a drain
        (`gap_min`) and the profile forecasts peaks better than persistence one slot ahead; else 0."""
        if self.profile is None or self.now is None:
            return 0
        return self.profile.soon(self.now, self.gap_min)


def _push_decreasing(stack: list[tuple[float, int]], minute: float, value: int, *, old: float) -> None:
    """Keep `stack` strictly decreasing in value from oldest to newest and within the window: an older
    entry that the new value dominates can never answer a query again."""
    while stack and stack[-1][1] <= value:
        stack.pop()
    stack.append((minute, value))
    drop = 0
    while drop < len(stack) - 1 and stack[drop][0] <= old:
        drop += 1
    if drop:
        del stack[:drop]
