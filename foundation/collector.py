"""The collector protocol shared by every collector."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from foundation.exposition import MetricFamily


@runtime_checkable
class Collector(Protocol):
    """Something that produces metric families on demand.

    `collect` raises (any exception) only when the collector as a whole failed; a single bad value is
    skipped and counted by the collector itself. The registry never calls `collect` of one collector
    twice at once.
    """

    name: str

    def collect(self) -> list[MetricFamily]:
        """Read the source once and return the families for this scrape."""
        ...

    def close(self) -> None:
        """Release handles (file descriptors, NVML, threads)."""
        ...
