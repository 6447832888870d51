"""Errors of the scheduler exporter, under the exporter's one root (exporter.errors.ExporterError)."""

from __future__ import annotations

from exporter.errors import ExporterError


class SchedulerError(ExporterError):
    """Root of the scheduler exporter's errors: one poll of the scheduler failed."""


class CommandError(SchedulerError):
    """A Slurm client could not run, exited non-zero, or did not finish before its timeout."""


class SlurmReportedError(SchedulerError):
    """A Slurm client answered, but with an error (for example: the controller cannot be reached)."""


class ParseError(SchedulerError):
    """A Slurm client's output is not in the expected format."""


class NoFreshDataError(SchedulerError):
    """The collector has no fresh poll result to serve (last poll failed, none yet, or too old)."""
