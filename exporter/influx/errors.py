"""Errors of the InfluxDB push (under the exporter's root, ExporterError)."""

from __future__ import annotations

from exporter.errors import ExporterError


class InfluxPushError(ExporterError):
    """Root of every error the InfluxDB push raises on purpose."""


class SpillError(InfluxPushError):
    """The spill directory cannot be used (not writable, or held by another exporter)."""
