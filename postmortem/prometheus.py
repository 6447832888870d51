"""Source: a Prometheus HTTP API (`query_range` over recording rules and `ALERTS`) plus the proposal store.

The HTTP side goes through a `Fetch` (path and query parameters -> decoded JSON), so tests answer with a fake.
Series: pool utilization `pool:ibpool_gpu_utilization_ratio:avg` and pending GPUs
`pool:ibpool_pool_pending_gpus:sum` (by `pool`), congestion
`fabric_port:ibpool_fabric_port_congestion:ratio_rate5m` (switch ports, by `node_guid`/`node_desc` and `port`)
and `port:ibpool_infiniband_congestion:ratio_rate5m` (HCA ports, by `node`, `device`, `port`).
Alerts: `ALERTS{alertstate="firing"}` sampled every step; a firing run becomes an `alert` event at its first
sample and a `resolved` event after its last one (unless it lasts to the end). Proposals, approvals,
refusals and applies come from the store's audit log.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from postmortem import alerts as alert_views
from postmortem.effects import measure
from postmortem.model import FAULT_WORDS, Alert, Effect, Event, InputError, Point, RunData
from proposals.errors import StoreError
from proposals.store import Store

Fetch = Callable[[str, Mapping[str, str]], Any]

UTILIZATION = "pool:ibpool_gpu_utilization_ratio:avg"
PENDING = "pool:ibpool_pool_pending_gpus:sum"
FABRIC_CONGESTION = "fabric_port:ibpool_fabric_port_congestion:ratio_rate5m"
HCA_CONGESTION = "port:ibpool_infiniband_congestion:ratio_rate5m"
ALERTS = 'ALERTS{alertstate="firing"}'


def http_fetch(base_url: str, timeout_s: float = 30.0) -> Fetch:
    """A Fetch that GETs `base_url + path` and decodes the JSON answer."""

    def fetch(path: str, params: Mapping[str, str]) -> Any:
        url = base_url.rstrip("/") + path + "?" + urllib.parse.urlencode(sorted(params.items()))
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")[:300]
            raise InputError(f"Prometheus at {base_url}: HTTP {exc.code}: {body}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InputError(f"cannot query Prometheus at {base_url}: {exc}") from None

    return fetch


class PrometheusSource:
    """Reads the report's series from a Prometheus HTTP API."""

    def __init__(self, fetch: Fetch, step_s: float = 60.0) -> None:
        self.fetch = fetch
        self.step_s = step_s

    def query_range(self, query: str, start: float, end: float) -> list[tuple[dict[str, str], list[Point]]]:
        """One `query_range`: (labels, points) per series, NaN samples left out."""
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{self.step_s:g}s"}
        answer = self.fetch("/api/v1/query_range", params)
        if not isinstance(answer, dict) or answer.get("status") != "success":
            error = answer.get("error", answer) if isinstance(answer, dict) else answer
            raise InputError(f"Prometheus query {query!r} failed: {error}")
        result = []
        for item in answer.get("data", {}).get("result", []):
            points = []
            for at, value in item.get("values", []):
                number = float(value)
                if not math.isnan(number):
                    points.append((float(at), number))
            result.append(({str(k): str(v) for k, v in item.get("metric", {}).items()}, points))
        return result

    def _by(
        self, query: str, start: float, end: float, label: Callable[[dict[str, str]], str]
    ) -> dict[str, list[Point]]:
        series: dict[str, list[Point]] = {}
        for labels, points in self.query_range(query, start, end):
            series.setdefault(label(labels), []).extend(points)
        return {k: sorted(v) for k, v in series.items()}

    def alerts(self, start: float, end: float) -> list[Alert]:
        """Firing runs from ALERTS samples (a gap over 1.5 steps ends a run), with their severity."""
        out = []
        for labels, points in self.query_range(ALERTS, start, end):
            name = labels.get("alertname", "?")
            rest = {
                k: v
                for k, v in labels.items()
                if k not in ("__name__", "alertname", "alertstate", "severity")
            }
            runs: list[list[float]] = []
            for at, _ in sorted(points):
                if not runs or at - runs[-1][-1] > self.step_s * 1.5:
                    runs.append([])
                runs[-1].append(at)
            for run in runs:
                ended = run[-1] + self.step_s if run[-1] + self.step_s * 1.5 < end else None
                duration = (ended if ended is not None else run[-1] + self.step_s) - run[0]
                out.append(Alert(name, labels.get("severity", ""), rest, run[0], ended, duration))
        return out

    def alert_events(self, start: float, end: float) -> list[Event]:
        """Firing / resolved events from ALERTS samples."""
        return alert_views.events(self.alerts(start, end))

    def load(self, start: float, end: float) -> RunData:
        """The series and alerts for [start, end]."""
        data = RunData(source="Prometheus")
        data.utilization = self._by(UTILIZATION, start, end, lambda m: m.get("pool", "?"))
        data.pending = self._by(PENDING, start, end, lambda m: m.get("pool", "?"))
        fabric = self._by(
            FABRIC_CONGESTION,
            start,
            end,
            lambda m: f"{m.get('node_desc') or m.get('node_guid', '?')}/{m.get('port', '?')}",
        )
        hca = self._by(
            HCA_CONGESTION,
            start,
            end,
            lambda m: f"{m.get('node', '?')}/{m.get('device', '?')}/{m.get('port', '?')}",
        )
        data.congestion = {**fabric, **hca}
        data.alerts = self.alerts(start, end)
        data.alert_source = "Prometheus ALERTS (the rules as that Prometheus evaluated them)"
        alerts = alert_views.events(data.alerts)
        faults = [
            Event(e.at, "fault", f"alert {e.summary}", e.name)
            for e in alerts
            if e.kind == "alert" and any(w in e.name.lower() for w in FAULT_WORDS)
        ]
        data.events = alerts + faults
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
