"""What can go wrong in a replay."""

from __future__ import annotations


class ReplayError(Exception):
    """Bad rules or series, or a replay program that failed: the message says which and why."""


class ReplayUnavailableError(ReplayError):
    """The replay programs (`victoria-metrics`, `vmalert`) are not installed here."""
