"""What the planner knows about one pool's demand: its trailing history, read as a forecast.

The planner asks two questions of a pool, both about a demand level in GPUs:

- as a **taker**, `shortfall(level, width)`: how many GPUs above `level` (at most `width`, one node) it
  wanted per minute over the recent window (the forecast of what one more node would serve), and how long
  its demand has stayed above `level` (an episode ends only at a gap of at least `gap_min` minutes at or
  below it: a dip shorter than a drain could not have given a node back anyway);
- as a **donor**, `idle(level)`: how long its demand has stayed at or below `level` (how long the node
  it would lend has been idle) and in which share of its demand minutes over the history window it went
  above `level` (the tail a loan would cut into).

The forecast is persistence on both sides: a shortfall that has lasted T minutes is expected to last
about T more, a node idle for T minutes to stay idle about T more (the planner caps both at its history
window). `DemandHistory` answers from the trailing samples only (the live recommender and the backtest's
policy); the backtest's hindsight reference answers the same questions from the future instead.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable
from typing import Protocol


class Outlook(Protocol):
    """A pool's demand as the planner reads it (minutes, GPUs)."""

    def shortfall(self, level: int, width: int) -> tuple[float, float]:
        """(mean GPUs above `level`, clipped to `width`, per minute; minutes the demand is expected to
        stay above `level`)."""
        ...

    def idle(self, level: int) -> tuple[float, float]:
        """(minutes the demand is expected to stay at or below `level`; share of demand minutes above it)."""
        ...

    def needs_soon(self, level: int) -> bool:
        """Whether the demand will exceed `level` before a node recalled now could arrive (only a
        hindsight outlook knows; a trailing one says False)."""
        ...

    def busy_minutes(self) -> int:
        """Minutes with demand that the tail share rests on."""
        ...


class DemandHistory:
    """Trailing demand samples of one pool, with the aggregates the planner reads kept incrementally.

    `push(minute, demand)` in time order. Windows are in minutes of sample time: `window_min` for the idle
    spans and the tail share, `recent_min` for the shortfall rate, `gap_min` for what ends an episode.
    """

    __slots__ = (
        "_above",
        "_busy",
        "_gap",
        "_hist",
        "_quiet",
        "_recent",
        "_samples",
        "first",
        "gap_min",
        "now",
        "recent_min",
        "window_min",
    )

    def __init__(self, window_min: float, recent_min: float, gap_min: float) -> None:
        self.window_min, self.recent_min, self.gap_min = window_min, recent_min, gap_min
        self._samples: deque[tuple[float, int]] = deque()
        self._recent: deque[tuple[float, int]] = deque()
        self._gap: deque[tuple[float, int]] = deque()  # sliding max of demand over gap_min
        self._above: list[tuple[float, int]] = []  # demand strictly decreasing: last time demand > y
        self._quiet: list[tuple[float, int]] = []  # gap max strictly increasing: last time it was <= x
        self._hist: list[int] = []  # demand value -> samples in the window (demand > 0 only)
        self._busy = 0
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
        if self.first is None:
            self.first = minute
        self.now = minute
        self._samples.append((minute, demand))
        if demand > 0:
            if demand >= len(self._hist):
                self._hist.extend([0] * (demand + 1 - len(self._hist)))
            self._hist[demand] += 1
            self._busy += 1
        old = minute - self.window_min
        while self._samples and self._samples[0][0] <= old:
            _, gone = self._samples.popleft()
            if gone > 0:
                self._hist[gone] -= 1
                self._busy -= 1
        self.first = max(self.first, self._samples[0][0])
        self._recent.append((minute, demand))
        while self._recent[0][0] <= minute - self.recent_min:
            self._recent.popleft()
        gap = self._gap
        while gap and gap[-1][1] <= demand:
            gap.pop()
        gap.append((minute, demand))
        while gap[0][0] <= minute - self.gap_min:
            gap.popleft()
        _push_stack(self._above, minute, demand, decreasing=True, old=old)
        _push_stack(self._quiet, minute, gap[0][1], decreasing=False, old=old)

    @property
    def watched_min(self) -> float:
        """Minutes of history held (0 before two samples)."""
        return 0.0 if self.first is None or self.now is None else self.now - self.first

    def demand_now(self) -> int:
        """The newest sample (0 with none)."""
        return self._samples[-1][1] if self._samples else 0

    def shortfall(self, level: int, width: int) -> tuple[float, float]:
        """See `Outlook.shortfall`: the rate over the recent window, the episode's length so far."""
        if not self._recent or self.now is None:
            return 0.0, 0.0
        rate = sum(min(width, d - level) for _, d in self._recent if d > level) / len(self._recent)
        # the newest time the gap max was <= level: the stack holds increasing maxima
        keys = [m for _, m in self._quiet]
        i = bisect_right(keys, level)
        since = self._quiet[i - 1][0] if i else (self.first if self.first is not None else self.now)
        return rate, self.now - since

    def idle(self, level: int) -> tuple[float, float]:
        """See `Outlook.idle`: the time since demand last exceeded `level`, its tail share above it."""
        if self.now is None:
            return 0.0, 0.0
        keys = [-d for _, d in self._above]  # demand decreasing along the stack
        i = bisect_left(keys, -level)  # entries with demand > level come first
        since = self._above[i - 1][0] if i else (self.first if self.first is not None else self.now)
        above = sum(self._hist[level + 1 :]) if level + 1 < len(self._hist) else 0
        tail = above / self._busy if self._busy else 0.0
        return self.now - since, tail

    def busy_minutes(self) -> int:
        """Samples with demand in the history window (how much evidence a tail share rests on)."""
        return self._busy

    def needs_soon(self, level: int) -> bool:
        """A trailing history cannot see ahead."""
        return False


def _push_stack(
    stack: list[tuple[float, int]], minute: float, value: int, *, decreasing: bool, old: float
) -> None:
    """Keep `stack` monotonic (values strictly decreasing or increasing from oldest to newest) and within
    the window: an older entry that the new value dominates can never answer a query again."""
    if decreasing:
        while stack and stack[-1][1] <= value:
            stack.pop()
    else:
        while stack and stack[-1][1] >= value:
            stack.pop()
    stack.append((minute, value))
    drop = 0
    while drop < len(stack) - 1 and stack[drop][0] <= old:
        drop += 1
    if drop:
        del stack[:drop]
