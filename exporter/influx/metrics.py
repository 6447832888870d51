"""Self metrics of the InfluxDB push and the collector that serves them on the exporter's scrape.

The specs live in `exporter/catalog.py`, the one catalog.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from exporter.catalog import (
    INFLUX_BUFFER_POINTS,
    INFLUX_LAST_WRITE,
    INFLUX_POINTS_DROPPED,
    INFLUX_POINTS_REPLAYED,
    INFLUX_POINTS_RETRIED,
    INFLUX_POINTS_WRITTEN,
    INFLUX_SPILL_BYTES,
    INFLUX_SPILL_CORRUPT_RECORDS,
    INFLUX_SPILL_DISABLED,
    INFLUX_SPILL_ERRORS,
    INFLUX_SPILL_POINTS,
)
from exporter.influx.buffer import BUFFER_DROP_REASONS, BufferState
from exporter.influx.spill import DROP_REASONS as SPILL_DROP_REASONS
from foundation.exposition import MetricFamily

DROP_REASONS = (*SPILL_DROP_REASONS, *BUFFER_DROP_REASONS, "not_finite")


@dataclass
class PushCounts:
    """Counters the pusher keeps itself."""

    written: int = 0
    retried: int = 0
    not_finite: int = 0
    last_write_unix: float | None = None


class PushStats:
    """Thread-safe counters of the sampler and sender threads."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._counts = PushCounts()
        self._clock = clock

    def written(self, points: int) -> None:
        """A batch of `points` was acknowledged now."""
        with self._lock:
            self._counts.written += points
            self._counts.last_write_unix = self._clock()

    def retried(self, points: int) -> None:
        """A batch of `points` failed and is queued again."""
        with self._lock:
            self._counts.retried += points

    def not_finite(self, points: int) -> None:
        """Points skipped because line protocol cannot carry their value."""
        with self._lock:
            self._counts.not_finite += points

    def snapshot(self) -> PushCounts:
        """A copy of the counters."""
        with self._lock:
            c = self._counts
            return PushCounts(c.written, c.retried, c.not_finite, c.last_write_unix)


def push_families(counts: PushCounts, state: BufferState) -> list[MetricFamily]:
    """The self-metric families for one scrape."""
    specs = (INFLUX_POINTS_WRITTEN, INFLUX_POINTS_RETRIED, INFLUX_POINTS_REPLAYED)
    families = [MetricFamily(spec) for spec in specs]
    for family, value in zip(families, (counts.written, counts.retried, state.replayed), strict=True):
        family.add((), value)
    dropped = MetricFamily(INFLUX_POINTS_DROPPED)
    reasons = {**dict.fromkeys(DROP_REASONS, 0), **state.dropped, "not_finite": counts.not_finite}
    for reason, points in sorted(reasons.items()):
        dropped.add((reason,), points)
    families.append(dropped)
    for spec, value in (
        (INFLUX_SPILL_CORRUPT_RECORDS, state.corrupt_records),
        (INFLUX_BUFFER_POINTS, state.memory_points),
        (INFLUX_SPILL_POINTS, state.spill_points),
        (INFLUX_SPILL_BYTES, state.spill_bytes),
        (INFLUX_SPILL_DISABLED, int(state.spill_disabled)),
        (INFLUX_SPILL_ERRORS, state.spill_errors),
    ):
        family = MetricFamily(spec)
        family.add((), value)
        families.append(family)
    if counts.last_write_unix is not None:
        last = MetricFamily(INFLUX_LAST_WRITE)
        last.add((), counts.last_write_unix)
        families.append(last)
    return families


class PushCollector:
    """The `influx_push` collector: the pusher's self metrics, for the exporter's own registry."""

    name = "influx_push"

    def __init__(self, stats: PushStats, state: Callable[[], BufferState]) -> None:
        self._stats = stats
        self._state = state

    def collect(self) -> list[MetricFamily]:
        """The current self metrics."""
        return push_families(self._stats.snapshot(), self._state())

    def close(self) -> None:
        """Nothing to release (the pusher owns its threads)."""
