"""What a report is made of, whichever source it came from: series, events, effects and the window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

Point = tuple[float, float]
"""(Unix seconds, value)."""


@dataclass(frozen=True)
class Event:
    """One timeline entry. kinds: scenario, fault, alert, resolved, proposal, approval, refusal, apply, ..."""

    at: float
    kind: str
    summary: str
    name: str = ""  # the alert name for alert / resolved, the proposal id for proposal-related kinds


@dataclass(frozen=True)
class Effect:
    """One applied change and per-pool metrics around it: `metrics[pool][metric] = (before, after)`."""

    at: float
    proposal_id: str
    kind: str
    policy: str
    changes: tuple[tuple[str, str, str], ...]
    expected_effect: str
    before: tuple[float, float]
    after: tuple[float, float]
    metrics: dict[str, dict[str, tuple[float | None, float | None]]]


@dataclass
class RunData:
    """Everything a report shows. Series are keyed by pool / link label and sorted by time."""

    source: str
    utilization: dict[str, list[Point]] = field(default_factory=dict)
    pending: dict[str, list[Point]] = field(default_factory=dict)
    congestion: dict[str, list[Point]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    effects: list[Effect] | None = None  # None: compute them from the series around each apply

    def span(self) -> tuple[float, float] | None:
        """The first and last moment of any series or event, or None when there is nothing."""
        times = [
            p[0]
            for group in (self.utilization, self.pending, self.congestion)
            for s in group.values()
            for p in s
        ]
        times += [e.at for e in self.events]
        return (min(times), max(times)) if times else None


class InputError(Exception):
    """Missing or unreadable input: reported on stderr with exit status 2."""


def rfc3339(unix: float) -> str:
    """UTC text with `Z`, to the second."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> float:
    """RFC 3339 (`Z` or an offset; a naive time is UTC) or Unix seconds -> Unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not a time (RFC 3339 or Unix seconds): {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1d` or plain seconds -> seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise InputError(f"not a duration (like 30m): {text!r}") from None
    if value < 0:
        raise InputError(f"negative duration: {text!r}")
    return value
