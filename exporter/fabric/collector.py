"""The fabric collectors: they hand the registry what the background sweeps found (no I/O).

Two collectors, so that `ibpool_exporter_collector_success` says when the fabric data is not current:

* `fabric` serves the families of the last complete sweep, with each port's counter age (and each
  switch's forwarding-table age) brought to the scrape. It fails (no series at all) before the first
  sweep and when that sweep, or the topology it used, is older than the bound
  (`BackgroundSweeper.stale_reason`): old links are never served as fresh.
* `fabric_status` never fails: the sweeps and skipped output lines since start and, once a sweep has
  completed, its timestamp, duration and the age of its topology (what the staleness alerts read).
"""

from __future__ import annotations

from exporter import catalog
from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.errors import NoSweepYetError, StaleFabricDataError
from exporter.fabric.sweep import PARSED_PROGRAMS
from foundation.exposition import MetricFamily

AGES = (catalog.FABRIC_PORT_COUNTERS_AGE, catalog.FABRIC_ROUTES_AGE)  # brought to the scrape


def _aged(family: MetricFamily, seconds: float) -> MetricFamily:
    """A copy of an age family with `seconds` more on every sample."""
    aged = MetricFamily(family.spec)
    aged.samples = [(labels, value + seconds) for labels, value in family.samples]
    return aged


class FabricCollector:
    """The last complete sweep's families while they are current (see the module docstring)."""

    name = "fabric"
    serves_snapshot = True  # reads the background loop's last result: runs inline, no deadline thread

    def __init__(self, source: BackgroundSweeper) -> None:
        self._source = source

    def collect(self) -> list[MetricFamily]:
        """The families; NoSweepYetError before the first sweep, StaleFabricDataError when too old."""
        published = self._source.latest
        if published is None:
            raise NoSweepYetError("no fabric sweep has completed yet")
        stale = self._source.stale_reason(published)
        if stale is not None:
            raise StaleFabricDataError(stale)
        since = self._source.ages(published).sweep_seconds
        return [_aged(family, since) if family.spec in AGES else family for family in published.families]

    def close(self) -> None:
        """Nothing to release (the sweeper is closed by its owner)."""


class FabricStatusCollector:
    """How the sweeps go, served even when the data is stale (see the module docstring)."""

    name = "fabric_status"
    serves_snapshot = True  # reads the background loop's last result: runs inline, no deadline thread

    def __init__(self, source: BackgroundSweeper) -> None:
        self._source = source

    def collect(self) -> list[MetricFamily]:
        """Sweep and skipped-line counts; timestamp, duration and topology age of the last sweep."""
        outcomes, skipped = self._source.counts()
        sweeps = MetricFamily(catalog.FABRIC_SWEEPS)
        for result in ("complete", "failed"):
            sweeps.add((result,), outcomes.get(result, 0))
        lines = MetricFamily(catalog.FABRIC_SKIPPED_LINES)
        for program in sorted(set(PARSED_PROGRAMS) | set(skipped)):
            lines.add((program,), skipped.get(program, 0))
        families = [sweeps, lines]
        published = self._source.latest
        if published is not None:
            for spec, value in (
                (catalog.FABRIC_SWEEP_TIMESTAMP, published.result.finished_at),
                (catalog.FABRIC_SWEEP_DURATION, published.result.duration_seconds),
                (catalog.FABRIC_TOPOLOGY_AGE, self._source.ages(published).topology_seconds),
            ):
                family = MetricFamily(spec)
                family.add((), value)
                families.append(family)
        return families

    def close(self) -> None:
        """Nothing to release."""
