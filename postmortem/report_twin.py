"""The report's first section for a demo run: did the loop help, against the same run without it."""

from __future__ import annotations

from html import escape

from postmortem.model import Point, Twin
from postmortem.svg import line_chart


def section(twin: Twin | None, window: tuple[float, float]) -> str:
    """The loop-vs-static table and both runs on one chart (nothing for sources without a twin)."""
    if twin is None:
        return ""
    rows = []
    for metric, static, loop, change in twin.rows:
        better = _direction(metric, change)
        css = f' class="{better}"' if better else ""
        rows.append(
            f"<tr{css}><td>{escape(metric)}</td><td class=num>{escape(static)}</td>"
            f"<td class=num>{escape(loop)}</td><td class=num>{escape(change)}</td></tr>"
        )
    series: dict[str, list[Point]] = {}
    for run, named in sorted(twin.series.items()):
        for name, points in named.items():
            series[f"{name}, {run}"] = points
    note = f'<p class="regression-flag">{escape(twin.note)}</p>' if twin.note else ""
    return (
        '<h2 id="loop">Did the loop help? The loop against the same run without it</h2>'
        "<p>The same seed, demand, scripted jobs and faults, run twice: <b>static</b> (partitions and QoS "
        "tables as configured, the baseline) and <b>loop</b> (the recommender's changes applied).</p>"
        + note
        + '<table id="loop-table"><tr><th>metric</th><th>static</th><th>loop</th><th>change</th></tr>'
        + "".join(rows)
        + '</table><div class="charts">'
        + line_chart(series, window, title="Both runs: GPU allocation and utilization", y_max=1.0, width=900)
        + "</div>"
    )


def _direction(metric: str, change: str) -> str:
    """`better`/`worse` for a row whose change has a sign (higher is better for allocation,
    utilization and GPU-hours; lower for the rest)."""
    text = change.removeprefix("p95 ").strip()
    if not text or text[0] not in "+-" or text in ("+0%", "-0%", "+0.0 pts", "-0.0 pts"):
        return ""
    up = text[0] == "+"
    higher_is_better = any(k in metric for k in ("allocation", "utilization", "GPU-hours"))
    return "better" if up == higher_is_better else "worse"
