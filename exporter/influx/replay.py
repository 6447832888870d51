"""Recently acknowledged batches, kept so they can be sent again when the server goes away.

A server can acknowledge a write and still lose it when it is killed: VictoriaMetrics (1.79, Debian 12)
keeps recent samples in memory for seconds (measured: 2,000 points acknowledged 5 s before a SIGKILL were
gone after the restart, 12 s before they were kept). A point carries its collection timestamp, so sending it
again is harmless (InfluxDB overwrites it, VictoriaMetrics with `-dedup.minScrapeInterval` keeps one copy):
on the first failed write after a success, the batches acknowledged in the last `seconds` go back in front.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class ReplayWindow:
    """Payloads acknowledged in the last `seconds`, at most `max_points` points of them."""

    def __init__(self, seconds: float, max_points: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.max_points = max_points
        self._clock = clock
        self._batches: deque[tuple[float, bytes, int]] = deque()
        self._points = 0

    @property
    def points(self) -> int:
        """Points held."""
        return self._points

    def add(self, payload: bytes, points: int) -> None:
        """Remember a batch the server has just acknowledged."""
        self._batches.append((self._clock(), payload, points))
        self._points += points
        self._trim()

    def take(self) -> list[tuple[bytes, int]]:
        """The batches still in the window, oldest first; the window is empty afterwards."""
        self._trim()
        out = [(payload, points) for _, payload, points in self._batches]
        self._batches.clear()
        self._points = 0
        return out

    def _trim(self) -> None:
        oldest = self._clock() - self.seconds
        while self._batches and (self._batches[0][0] < oldest or self._points > self.max_points):
            _, _, points = self._batches.popleft()
            self._points -= points
