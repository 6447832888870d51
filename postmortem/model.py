"""What a report is made of, whichever source it came from: series, events, alerts, effects, the twin."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

Point = tuple[float, float]
"""(Unix seconds, value)."""

# An alert whose name holds one of these is also listed with the faults (GPU and link failures).
FAULT_WORDS = ("error", "fault", "unavailable", "lost", "xid", "down", "fell", "ecc", "degraded")


@dataclass(frozen=True)
class Event:
    """One timeline entry. kinds: scenario, fault, alert, resolved, proposal, approval, refusal, apply, ..."""

    at: float
    kind: str
    summary: str
    name: str = ""  # the alert name for alert / resolved, the proposal id for proposal-related kinds


BEFORE_AFTER = "before/after"
COUNTERFACTUAL = "counterfactual"


@dataclass(frozen=True)
class Effect:
    """One applied change and per-pool metrics: `metrics[pool][metric] = (baseline, with the change)`.

    `basis` COUNTERFACTUAL: the baseline is the same run without the change over the same window (`after`),
    from the demo's twin; BEFORE_AFTER: the baseline is the window before it (`before`), the only view a
    live system has. `regressions` name the metrics that got worse beyond the tolerances
    (`postmortem.regressions`).
    """

    at: float
    proposal_id: str
    kind: str
    policy: str
    changes: tuple[tuple[str, str, str], ...]
    expected_effect: str
    before: tuple[float, float]
    after: tuple[float, float]
    metrics: dict[str, dict[str, tuple[float | None, float | None]]]
    basis: str = BEFORE_AFTER
    regressions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alert:
    """One firing run of an alert: from the rule engine's replay, or from Prometheus' ALERTS series."""

    name: str
    severity: str
    labels: Mapping[str, str]
    start: float
    end: float | None  # None: still firing at the end of the data
    duration: float
    summary: str = ""  # the rule's summary annotation
    expr: str = ""  # the rule's expression (for a Prometheus link)

    def subject(self) -> str:
        """What it is about: the switch port, node port, GPU or pool, from its labels."""
        labels = self.labels
        if labels.get("node_guid"):
            return f"{labels.get('node_desc') or labels['node_guid']}/{labels.get('port', '?')}"
        if labels.get("gpu") and labels.get("node"):
            return f"{labels['node']} GPU {labels['gpu']}"
        if labels.get("device") and labels.get("node"):
            return f"{labels['node']}/{labels['device']}/{labels.get('port', '?')}"
        for key in ("pool", "node", "target", "collector", "instance"):
            if labels.get(key):
                return f"{key} {labels[key]}"
        return ""


@dataclass(frozen=True)
class Twin:
    """The loop against its static twin: table rows (metric, static, loop, change) and charted series."""

    rows: tuple[tuple[str, str, str, str], ...]
    series: Mapping[str, Mapping[str, list[Point]]]  # run ("static" | "loop") -> series name -> points
    note: str = ""


@dataclass
class RunData:
    """Everything a report shows. Series are keyed by pool / link label and sorted by time."""

    source: str
    utilization: dict[str, list[Point]] = field(default_factory=dict)
    pending: dict[str, list[Point]] = field(default_factory=dict)
    congestion: dict[str, list[Point]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    effects: list[Effect] | None = None  # None: compute them from the series around each apply
    alerts: list[Alert] = field(default_factory=list)
    alert_source: str = ""  # where the alerts come from (or why there are none)
    twin: Twin | None = None

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


def clock(unix: float) -> str:
    """How every time is shown, in the report and on the demo's console: `2026-12-03 06:35 UTC` style,
    on the run's own clock (a demo's simulated time, a live system's UTC)."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M")


_RFC3339 = re.compile(r"\b(\d{4}-\d\d-\d\d)T(\d\d:\d\d):\d\d(?:\.\d+)?Z\b")


def clock_text(text: str) -> str:
    """`text` with every RFC 3339 UTC time in it (as the proposal store writes them into its messages)
    shown the way `clock` shows times, so one report never mixes two formats."""
    return _RFC3339.sub(r"\1 \2", text)


def duration_text(seconds: float) -> str:
    """`45 min`, `2 h 05 min`."""
    minutes = round(seconds / 60.0)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


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
