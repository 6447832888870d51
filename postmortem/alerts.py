"""Alerts for a report: the rule engine's firings with their rules' summary and expression, and the
timeline events (`alert` at the start, `resolved` at the end) they make."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from postmortem.model import Alert, Event, InputError
from postmortem.replay import Firing, ReplayError, RuleSet, replay_lines

SHIPPED_RULES = Path(__file__).resolve().parents[1] / "alerts"
"""The rule files as they ship (this repository's alerts/)."""


def from_firings(firings: Iterable[Firing], rules: RuleSet | None) -> list[Alert]:
    """Firings as report alerts, each with its rule's summary and expression when the rules are known."""
    out = []
    for f in firings:
        rule = rules.alert(f.name, f.severity) if rules is not None else None
        out.append(
            Alert(
                name=f.name,
                severity=f.severity,
                labels=dict(f.labels),
                start=f.start,
                end=f.end,
                duration=f.duration(),
                summary=rule.annotations.get("summary", "") if rule is not None else "",
                expr=rule.expr if rule is not None else "",
            )
        )
    return out


def from_dict(item: Mapping[str, Any]) -> Alert:
    """An alert as alerts.json keeps it (KeyError/TypeError/ValueError for a malformed entry)."""
    end = item.get("end")
    return Alert(
        name=str(item["name"]),
        severity=str(item.get("severity", "")),
        labels={str(k): str(v) for k, v in dict(item.get("labels") or {}).items()},
        start=float(item["start"]),
        end=None if end is None else float(end),
        duration=float(item["duration"]),
        summary=str(item.get("summary", "")),
        expr=str(item.get("expr", "")),
    )


def events(alerts: Sequence[Alert]) -> list[Event]:
    """`alert` events at each start and `resolved` events at each end."""
    out = []
    for a in alerts:
        what = f"{a.name} {a.severity} {a.subject()}".strip()
        out.append(Event(a.start, "alert", what, a.name))
        if a.end is not None:
            out.append(Event(a.end, "resolved", what, a.name))
    return out


def load_rules(paths: Sequence[Path], settings: Mapping[str, str] | None = None) -> RuleSet:
    """Rule files for a replay; InputError lists their problems."""
    try:
        return RuleSet.load(paths, settings)
    except ReplayError as exc:
        raise InputError(str(exc)) from None


def replay_run(series: Path, rules: RuleSet, start: float, end: float) -> list[Alert]:
    """What `rules` fire over a run directory's recorded series (InputError when it cannot run)."""
    try:
        data = series.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {series}: {exc.strerror or exc}") from None
    try:
        return from_firings(replay_lines(data, rules, start, end).firings, rules)
    except ReplayError as exc:
        raise InputError(f"alerts not replayed: {exc}") from None
