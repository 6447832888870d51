"""Per-consumer activity averages: the mean since this consumer's previous scrape, from running totals.

Snapshots carry running totals (sum, weight) of each activity ratio. Each collector instance (Prometheus's,
the InfluxDB push's) keeps its own position in every total, so each sees the mean over its own interval and
nothing between its scrapes is lost, however often the GPUs are sampled. At first sight of a total, after
the GPU's epoch changed, or when no weight was added since the previous scrape, the snapshot's own ratio
(the mean over its read, or the source's stale fallback) is used.
"""

from __future__ import annotations

from collections.abc import Hashable

from exporter.sources.gpu_snapshot import Total


class WindowAverages:
    """Positions of one consumer in the running totals it has seen, by key."""

    def __init__(self) -> None:
        self._positions: dict[Hashable, tuple[int, float, float]] = {}

    def mean(self, key: Hashable, epoch: int, total: Total | None, fallback: float | None) -> float | None:
        """The mean since this consumer last asked for `key`, or `fallback` (see the module docstring)."""
        if total is None:
            return fallback
        value, weight = total
        previous = self._positions.get(key)
        self._positions[key] = (epoch, value, weight)
        if previous is None or previous[0] != epoch or weight < previous[2]:
            return fallback
        added = weight - previous[2]
        return (value - previous[1]) / added if added > 0 else fallback
