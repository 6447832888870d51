"""Errors of the fabric exporter (all under the exporter's root, ExporterError)."""

from __future__ import annotations

from exporter.errors import ExporterError


class FabricError(ExporterError):
    """Root of the fabric exporter's own errors."""


class DiscoveryError(FabricError):
    """The fabric could not be discovered and no earlier topology is known."""


class NoSweepYetError(FabricError):
    """No sweep has completed yet, so there is nothing to serve."""


class StaleFabricDataError(FabricError):
    """The last complete sweep, or the topology it used, is too old to be served as current."""


class NameMapError(FabricError):
    """The GUID-to-name map file is unreadable or malformed; carries every problem found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
