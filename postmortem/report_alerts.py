"""The report's alerts section: every firing with its severity, how long it fired, and where to look next
(runbook, Grafana panel, Prometheus query: `postmortem.links`)."""

from __future__ import annotations

from html import escape

from postmortem.links import LinkSettings, grafana, prometheus, runbook
from postmortem.model import Alert, clock, duration_text

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _link(url: str | None, text: str, css: str) -> str:
    if url is None:
        return ""
    return f'<a class="{css}" href="{escape(url)}">{escape(text)}</a>'


def section(alerts: list[Alert], source: str, window: tuple[float, float], links: LinkSettings) -> str:
    """The alerts that fired in the window (any overlap), most severe first within their start time."""
    head = '<h2 id="alerts">Alerts</h2>' + f'<p class="muted" id="alert-source">{escape(source)}</p>'
    shown = [a for a in alerts if a.start <= window[1] and (a.end is None or a.end >= window[0])]
    if not shown:
        return head + '<p class="muted">No alert fired in the window.</p>'
    shown.sort(key=lambda a: (a.start, SEVERITY_ORDER.get(a.severity, 3), a.name, a.subject()))
    rows = []
    for a in shown:
        book = runbook(a.name, links)
        name = _link(book, a.name, "runbook") if book else escape(a.name)
        more = " ".join(
            x
            for x in (
                _link(book, "runbook", "runbook-link"),
                _link(grafana(a, links, window[1]), "Grafana panel", "grafana"),
                _link(prometheus(a, links, window[1]), "Prometheus query", "prometheus"),
            )
            if x
        )
        end = clock(a.end) if a.end is not None else "still firing"
        rows.append(
            f'<tr class="alert sev-{escape(a.severity)}"><td>{name}</td>'
            f'<td class="severity sev-{escape(a.severity)}">{escape(a.severity or "-")}</td>'
            f"<td>{escape(a.subject())}</td><td class=time>{clock(a.start)}</td><td class=time>{end}</td>"
            f"<td class=num>{escape(duration_text(a.duration))}</td>"
            f"<td>{escape(a.summary)}</td><td>{more or '-'}</td></tr>"
        )
    return (
        head
        + f"<p>{len(shown)} firing run(s) of {len({a.name for a in shown})} alert(s).</p>"
        + '<table class="alerts"><tr><th>alert</th><th>severity</th><th>on</th><th>from</th><th>to</th>'
        "<th>fired for</th><th>summary</th><th>look next</th></tr>" + "".join(rows) + "</table>"
    )
