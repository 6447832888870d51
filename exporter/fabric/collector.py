"""The fabric collector: hands the registry the families of the last complete sweep (no I/O)."""

from __future__ import annotations

from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.errors import NoSweepYetError
from foundation.exposition import MetricFamily


class FabricCollector:
    """The registry's view of the fabric: the families of the last complete sweep."""

    name = "fabric"

    def __init__(self, source: BackgroundSweeper) -> None:
        self._source = source

    def collect(self) -> list[MetricFamily]:
        """The last complete sweep's families; NoSweepYetError before the first one."""
        published = self._source.latest
        if published is None:
            raise NoSweepYetError("no fabric sweep has completed yet")
        return list(published.families)

    def close(self) -> None:
        """Nothing to release (the sweeper is closed by its owner)."""
