"""The exporters' exception hierarchy: one root, one subclass per kind of fault."""

from foundation.errors import IbpoolError


class ExporterError(IbpoolError):
    """Root of every error the exporters raise on purpose."""


class SourceError(ExporterError):
    """A hardware source could not be read as a whole (not one bad value: those are counted)."""
