"""Sliding-window minima and maxima (monotonic deques, O(1) amortised per step) and quantiles over series."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Sequence

from recommender.quantiles import rank_of


def trailing_max(values: Sequence[int], width: int) -> list[int]:
    """out[t] = max(values[t - width + 1 .. t]), the window clipped at the start."""
    width = max(1, width)
    out: list[int] = []
    window: deque[tuple[int, int]] = deque()
    for t, v in enumerate(values):
        while window and window[-1][1] <= v:
            window.pop()
        window.append((t, v))
        if window[0][0] <= t - width:
            window.popleft()
        out.append(window[0][1])
    return out


def leading_max(values: Sequence[int], offset: int, width: int) -> list[int]:
    """out[t] = max(values[t + offset .. t + offset + width - 1]), clipped at the end (last value repeats)."""
    n = len(values)
    back = trailing_max(values[::-1], max(1, width))[::-1]
    return [back[min(n - 1, t + offset)] for t in range(n)]


def leading_min(values: Sequence[int], offset: int, width: int) -> list[int]:
    """out[t] = min(values[t + offset .. t + offset + width - 1]), clipped at the end."""
    negated = leading_max([-v for v in values], offset, width)
    return [-v for v in negated]


class SlidingMin:
    """Minimum of the last `width` values pushed."""

    __slots__ = ("_count", "_window", "width")

    def __init__(self, width: int) -> None:
        self.width = max(1, width)
        self._window: deque[tuple[int, int]] = deque()
        self._count = 0

    def push(self, value: int) -> int:
        """Add a value; return the minimum of the window that ends with it."""
        window, t = self._window, self._count
        while window and window[-1][1] >= value:
            window.pop()
        window.append((t, value))
        if window[0][0] <= t - self.width:
            window.popleft()
        self._count = t + 1
        return window[0][1]


class SlidingQuantile:
    """Nearest-rank `q`-quantile of the last `width` values pushed (the window clipped at the start);
    O(width) per push, for the short persistence windows."""

    __slots__ = ("_fifo", "_sorted", "q", "width")

    def __init__(self, width: int, q: float) -> None:
        self.width = max(1, width)
        self.q = q
        self._fifo: deque[int] = deque()
        self._sorted: list[int] = []

    def push(self, value: int) -> int:
        """Add a value; return the quantile of the window that ends with it."""
        self._fifo.append(value)
        insort(self._sorted, value)
        if len(self._fifo) > self.width:
            del self._sorted[bisect_left(self._sorted, self._fifo.popleft())]
        return self._sorted[rank_of(self.q, len(self._sorted)) - 1]
