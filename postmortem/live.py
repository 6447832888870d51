"""A live system's report data: series from any store (`SeriesSource`) plus the proposal store's audit log.

Series (the selectors `SERIES`): pool utilization `pool:ibpool_gpu_utilization_ratio:avg` and pending GPUs
`pool:ibpool_pool_pending_gpus:sum` (by `pool`), congestion
`fabric_port:ibpool_fabric_port_congestion:ratio_rate5m` (switch ports, by `node_guid`/`node_desc` and
`port`) and `port:ibpool_infiniband_congestion:ratio_rate5m` (HCA ports, by `node`, `device`, `port`): the
recording rules, as Prometheus recorded them or as a replay of the rules computes them from the raw
series (`postmortem.live_replay`). Alerts: `ALERTS{alertstate="firing"}` sampled every step; a firing run
becomes an `alert` event at its first sample and a `resolved` event after its last one (unless it lasts to
the end); alerts whose name reads like a failure are listed as faults too. Proposals, approvals, refusals
and applies come from the store's audit log; each applied change's effect is the series before against
after it (`postmortem.effects`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from postmortem import alerts as alert_views
from postmortem.effects import measure
from postmortem.model import FAULT_WORDS, Alert, Effect, Event, InputError, Point, RunData
from postmortem.source import Selector, SeriesSource
from proposals.errors import StoreError
from proposals.store import Store

UTILIZATION = Selector("pool:ibpool_gpu_utilization_ratio:avg")
PENDING = Selector("pool:ibpool_pool_pending_gpus:sum")
FABRIC_CONGESTION = Selector("fabric_port:ibpool_fabric_port_congestion:ratio_rate5m")
HCA_CONGESTION = Selector("port:ibpool_infiniband_congestion:ratio_rate5m")
ALERTS = Selector("ALERTS", (("alertstate", "firing"),))
SERIES = (UTILIZATION, PENDING, FABRIC_CONGESTION, HCA_CONGESTION)
RECORDED = frozenset(s.name for s in SERIES)


def _by(
    source: SeriesSource,
    selector: Selector,
    window: tuple[float, float, float],
    label: Callable[[dict[str, str]], str],
) -> dict[str, list[Point]]:
    series: dict[str, list[Point]] = {}
    for labels, points in source.select(selector, *window):
        series.setdefault(label(labels), []).extend(points)
    return {k: sorted(v) for k, v in series.items()}


def load_series(source: SeriesSource, start: float, end: float, step: float, data: RunData) -> None:
    """Fill `data`'s utilization, pending and congestion series from `source`."""
    window = (start, end, step)
    data.utilization = _by(source, UTILIZATION, window, lambda m: m.get("pool", "?"))
    data.pending = _by(source, PENDING, window, lambda m: m.get("pool", "?"))
    fabric = _by(
        source,
        FABRIC_CONGESTION,
        window,
        lambda m: f"{m.get('node_desc') or m.get('node_guid', '?')}/{m.get('port', '?')}",
    )
    hca = _by(
        source,
        HCA_CONGESTION,
        window,
        lambda m: f"{m.get('node', '?')}/{m.get('device', '?')}/{m.get('port', '?')}",
    )
    data.congestion = {**fabric, **hca}


def alerts(source: SeriesSource, start: float, end: float, step: float) -> list[Alert]:
    """Firing runs from ALERTS samples (a gap over 1.5 steps ends a run), with their severity."""
    out = []
    for labels, points in source.select(ALERTS, start, end, step):
        name = labels.get("alertname", "?")
        rest = {
            k: v for k, v in labels.items() if k not in ("__name__", "alertname", "alertstate", "severity")
        }
        runs: list[list[float]] = []
        for at, _ in sorted(points):
            if not runs or at - runs[-1][-1] > step * 1.5:
                runs.append([])
            runs[-1].append(at)
        for run in runs:
            ended = run[-1] + step if run[-1] + step * 1.5 < end else None
            duration = (ended if ended is not None else run[-1] + step) - run[0]
            out.append(Alert(name, labels.get("severity", ""), rest, run[0], ended, duration))
    return out


def set_alerts(data: RunData, found: Sequence[Alert], source: str) -> None:
    """Replace `data`'s alerts, their events and the faults they stand for."""
    data.alerts = list(found)
    data.alert_source = source
    events = alert_views.events(data.alerts)
    faults = [
        Event(e.at, "fault", f"alert {e.summary}", e.name)
        for e in events
        if e.kind == "alert" and any(w in e.name.lower() for w in FAULT_WORDS)
    ]
    kept = [e for e in data.events if e.kind not in ("alert", "resolved", "fault")]
    data.events = kept + events + faults


def load(source: SeriesSource, start: float, end: float, step: float) -> RunData:
    """The series and the recorded alerts for [start, end]."""
    data = RunData(source=source.where)
    load_series(source, start, end, step, data)
    set_alerts(
        data, alerts(source, start, end, step), f"ALERTS in {source.where} (the rules as they ran then)"
    )
    return data


def audit_events(
    db: Path, series: RunData | None = None, window_s: float = 600.0
) -> tuple[list[Event], list[Effect]]:
    """Proposal, approval, refusal and apply events from the proposal store's audit log, and for each applied
    change its effect measured on `series` (mean over `window_s` before and after the apply)."""
    if not db.is_file():
        raise InputError(f"no proposal store at {db}")
    try:
        with Store(db, create=False) as store:
            stored = {p.id: p for p in store.list_proposals()}
            entries = store.audit()
    except StoreError as exc:
        raise InputError(str(exc)) from None
    events: list[Event] = []
    effects: list[Effect] = []
    for entry in entries:
        proposal = stored.get(entry.proposal_id)
        short = entry.proposal_id[:12]
        what = f"{proposal.proposal.kind} {short}" if proposal is not None else short
        at = entry.at.timestamp()
        if entry.result != "ok" or entry.to_state == "rejected":
            events.append(
                Event(at, "refusal", f"{what} refused by {entry.who}: {entry.detail}", entry.proposal_id)
            )
        elif entry.from_state is None:
            text = ""
            if proposal is not None:
                text = "; ".join(f"{c.target} {c.before} -> {c.after}" for c in proposal.proposal.changes)
            events.append(Event(at, "proposal", f"{what} by {entry.who}: {text}", entry.proposal_id))
        elif entry.to_state == "approved":
            events.append(
                Event(at, "approval", f"{short} approved by {entry.who}: {entry.detail}", entry.proposal_id)
            )
        elif entry.to_state in ("applied", "failed", "rolled_back"):
            events.append(Event(at, "apply", f"{short} {entry.to_state}: {entry.detail}", entry.proposal_id))
            if entry.to_state == "applied" and proposal is not None and series is not None:
                p = proposal.proposal
                effects.append(
                    measure(
                        series,
                        at,
                        window_s,
                        proposal_id=entry.proposal_id,
                        kind=str(p.kind),
                        policy=p.policy,
                        changes=tuple((c.target, c.before, c.after) for c in p.changes),
                        expected_effect=p.expected_effect,
                    )
                )
    return events, effects
