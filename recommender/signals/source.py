"""What a signal source is: something that returns a `Signals` snapshot (never raises for missing data)."""

from __future__ import annotations

from typing import Protocol

from recommender.signals.model import Signals


class SignalsError(Exception):
    """A signal source cannot be built or used at all (bad URL, bad config)."""


class SignalSource(Protocol):
    """Returns the signals now; data it could not read is listed in `Signals.missing`."""

    name: str

    def fetch(self) -> Signals: ...

    def reset(self) -> None:
        """Forget any previous reading (the next rate window starts afresh)."""
