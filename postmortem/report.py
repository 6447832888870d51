"""The self-contained HTML report: inline CSS and SVG, no script and no external asset; the only links are
those an operator follows next (runbooks, Grafana, Prometheus: `postmortem.links`). The same input gives
the same bytes (nothing depends on the clock or on dictionary order). Every time is shown one way, on the
run's own clock (`postmortem.model.clock`: a demo's simulated UTC, a live system's UTC).

Sections: the loop against its static twin (demo runs), alerts, pools, congested links, faults, the
timeline, and each applied change with its effect.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from postmortem import report_alerts, report_changes, report_twin
from postmortem.effects import measure
from postmortem.links import LinkSettings
from postmortem.model import FAULT_WORDS, Effect, Event, Point, RunData, clock, clock_text
from postmortem.report_changes import fmt
from postmortem.svg import MARKER_COLORS, line_chart

TIMELINE_KINDS = ("scenario", "fault", "alert", "resolved", "proposal", "approval", "refusal", "apply")
BURST_GAP_S = 300.0
CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; }
h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.k-fault, .k-refusal { color: #b00; font-weight: bold; } .k-apply { color: #070; font-weight: bold; }
.k-alert { color: #c60; } .k-resolved { color: #777; } .k-proposal, .k-approval { color: #62a; }
td.time { white-space: nowrap; }
.muted { color: #777; } code { font-size: 12px; word-break: break-all; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
tr.regression td { color: #b00; font-weight: bold; background: #fde8e8; }
.regression-flag { color: #fff; background: #c00; font-weight: bold; padding: 4px 8px;
  display: inline-block; }
.badge { color: #fff; background: #c00; border-radius: 3px; padding: 0 4px; font-size: 11px; }
.effect.has-regression { border-left: 6px solid #c00; padding-left: 10px; }
tr.better td:last-child { color: #070; font-weight: bold; }
tr.worse td:last-child { color: #b00; font-weight: bold; }
.severity.sev-critical { color: #fff; background: #c00; }
.severity.sev-warning { color: #000; background: #fc6; }
.severity.sev-info { background: #def; }
.moved { font-weight: bold; } .moved-in { color: #070; } .moved-out { color: #b00; }
"""


def _clip(points: list[Point], window: tuple[float, float]) -> list[Point]:
    return [p for p in points if window[0] <= p[0] <= window[1]]


def _is_fault(event: Event) -> bool:
    return event.kind == "fault" or (
        event.kind == "alert" and any(w in event.name.lower() for w in FAULT_WORDS)
    )


def bursts(events: list[Event]) -> list[list[Event]]:
    """Faults and fault-like alerts, grouped: a gap over BURST_GAP_S starts a new burst."""
    groups: list[list[Event]] = []
    for event in sorted((e for e in events if _is_fault(e)), key=lambda e: (e.at, e.kind, e.summary)):
        if groups and event.at - groups[-1][-1].at <= BURST_GAP_S:
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups


def effects_in(data: RunData, window: tuple[float, float], window_s: float = 600.0) -> list[Effect]:
    """The measured effects of changes applied in the window (computed from the series when not given)."""
    if data.effects is not None:
        found = data.effects
    else:
        found = [
            measure(
                data,
                e.at,
                window_s,
                proposal_id=e.name,
                kind="change",
                policy="",
                changes=(),
                expected_effect=e.summary,
            )
            for e in data.events
            if e.kind == "apply"
        ]
    return sorted((e for e in found if window[0] <= e.at <= window[1]), key=lambda e: (e.at, e.proposal_id))


def _section_pools(data: RunData, window: tuple[float, float], markers: list[tuple[float, str, str]]) -> str:
    util = {k: _clip(v, window) for k, v in data.utilization.items()}
    pend = {k: _clip(v, window) for k, v in data.pending.items()}
    if not any(util.values()) and not any(pend.values()):
        return (
            '<h2 id="pools">Pool utilization and queue</h2><p class="muted">No pool series in the window.</p>'
        )
    rows = []
    for pool in sorted(set(util) | set(pend)):
        u = [v for _, v in util.get(pool, [])]
        p = [v for _, v in pend.get(pool, [])]
        rows.append(
            f"<tr><td>{escape(pool)}</td><td class=num>{fmt(sum(u) / len(u) if u else None)}</td>"
            f"<td class=num>{fmt(min(u) if u else None)}</td>"
            f"<td class=num>{fmt(max(u) if u else None)}</td>"
            f"<td class=num>{fmt(max(p) if p else None)}</td></tr>"
        )
    return (
        '<h2 id="pools">Pool utilization and queue</h2><div class="charts">'
        + line_chart(util, window, title="GPU utilization by pool", y_max=1.0, markers=markers)
        + line_chart(pend, window, title="Pending GPUs by pool (queue)", markers=markers)
        + "</div><table><tr><th>pool</th><th>mean utilization</th><th>min</th><th>max</th>"
        "<th>peak pending GPUs</th></tr>" + "".join(rows) + "</table>"
    )


def _section_links(
    data: RunData, window: tuple[float, float], top: int, markers: list[tuple[float, str, str]]
) -> str:
    peaks = []
    for link, points in data.congestion.items():
        inside = _clip(points, window)
        if inside:
            peak = max(v for _, v in inside)
            if peak > 0:
                peaks.append((peak, link, inside))
    peaks.sort(key=lambda item: (-item[0], item[1]))
    head = f'<h2 id="links">Most congested links (top {top} by peak wait share)</h2>'
    if not peaks:
        return head + '<p class="muted">No congestion in the window.</p>'
    rows, charts = [], []
    for peak, link, points in peaks[:top]:
        busy = sum(1 for _, v in points if v >= 0.2)
        rows.append(
            f"<tr><td>{escape(link)}</td><td class=num>{fmt(peak)}</td>"
            f"<td class=num>{fmt(sum(v for _, v in points) / len(points))}</td>"
            f"<td class=num>{busy}</td></tr>"
        )
        charts.append(
            line_chart(
                {link: points},
                window,
                title=f"{link} congestion",
                width=370,
                height=150,
                y_max=1.0,
                markers=markers,
            )
        )
    return (
        head
        + "<table><tr><th>link</th><th>peak</th><th>mean</th><th>samples &ge; 0.2</th></tr>"
        + "".join(rows)
        + '</table><div class="charts">'
        + "".join(charts)
        + "</div>"
    )


def _section_faults(events: list[Event]) -> str:
    groups = bursts(events)
    head = '<h2 id="faults">Error bursts and GPU faults</h2>'
    if not groups:
        return head + '<p class="muted">No faults or error alerts in the window.</p>'
    rows = []
    for index, group in enumerate(groups, 1):
        for event in group:
            rows.append(
                f"<tr><td class=num>{index}</td><td class=time>{clock(event.at)}</td>"
                f'<td class="k-{escape(event.kind)}">{escape(event.kind)}</td>'
                f"<td>{escape(clock_text(event.summary))}</td></tr>"
            )
    return (
        head + f"<p>{len(groups)} burst(s) (events less than {BURST_GAP_S / 60:g} minutes apart are one "
        "burst).</p>"
        + "<table><tr><th>burst</th><th>time</th><th>kind</th><th>what</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _section_timeline(events: list[Event]) -> str:
    if not events:
        return '<h2 id="timeline">Timeline</h2><p class="muted">No events in the window.</p>'
    rows = "".join(
        f'<tr class="ev ev-{escape(e.kind)}"><td class=time>{clock(e.at)}</td>'
        f'<td class="k-{escape(e.kind)}">{escape(e.kind)}</td>'
        f"<td>{escape(clock_text(e.summary))}</td></tr>"
        for e in events
    )
    counts = ", ".join(
        f"{sum(1 for e in events if e.kind == k)} {k}"
        for k in TIMELINE_KINDS
        if any(e.kind == k for e in events)
    )
    return (
        '<h2 id="timeline">Timeline: alerts, proposals, approvals, applied changes and faults</h2>'
        f"<p>{escape(counts)}.</p><table><tr><th>time</th><th>kind</th><th>what</th></tr>{rows}</table>"
    )


def render(
    data: RunData,
    window: tuple[float, float],
    *,
    top: int = 6,
    title: str = "ibpool post-mortem",
    links: LinkSettings | None = None,
) -> str:
    """The whole report as one HTML document."""
    links = links or LinkSettings(report_dir=Path("."))
    events = sorted(
        (e for e in data.events if window[0] <= e.at <= window[1] and e.kind in TIMELINE_KINDS),
        key=lambda e: (e.at, TIMELINE_KINDS.index(e.kind), e.summary),
    )
    markers = [(e.at, e.kind, e.summary) for e in events if e.kind in MARKER_COLORS and e.kind != "alert"]
    effects = effects_in(data, window)
    applied = sum(1 for e in events if e.kind == "apply")
    regressions = sum(1 for e in effects if e.regressions)
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f"<title>{escape(title)} {clock(window[0])} to {clock(window[1])}</title>",
            f"<style>{CSS}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f'<p id="window">Window: <b>{clock(window[0])}</b> to <b>{clock(window[1])}</b> UTC, the run\'s '
            f"clock ({(window[1] - window[0]) / 60:.0f} minutes). Source: {escape(data.source)}.</p>",
            f"<p>{sum(1 for e in events if e.kind == 'alert')} alert(s), "
            f"{sum(1 for e in events if e.kind == 'proposal')} proposal(s), {applied} applied change(s)"
            + (
                f' (<span class="regression-flag">{regressions} with a regression</span>)'
                if regressions
                else ""
            )
            + f", {sum(1 for e in events if e.kind == 'fault')} fault(s). Dashed lines on the charts: "
            "green applied change, red fault, purple proposal.</p>",
            report_twin.section(data.twin, window),
            report_alerts.section(data.alerts, data.alert_source, window, links),
            _section_pools(data, window, markers),
            _section_links(data, window, top, markers),
            _section_faults(events),
            _section_timeline(events),
            report_changes.section(effects),
            "</body></html>\n",
        ]
    )
