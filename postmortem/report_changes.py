"""The report's section on applied changes: what each changed (node lists as Slurm hostlists, the moved
nodes marked) and its effect per pool against its baseline, regressions flagged in red."""

from __future__ import annotations

from html import escape

from postmortem.changes import hostlist, moves, node_change
from postmortem.model import COUNTERFACTUAL, Effect, clock
from postmortem.regressions import worse

METRIC_LABELS = {
    "utilization": "GPU utilization",
    "allocation": "GPU allocation",
    "allocated_gpus": "allocated GPUs",
    "pending_gpus": "pending GPUs",
    "pending_gpu_minutes": "pending GPU-minutes",
    "pending_gpu_minutes_per_hour": "pending GPU-minutes per hour",
    "wait_p95_minutes": "job wait p95 (min)",
    "iteration_seconds": "multi-node iteration time (s)",
    "slowdown": "multi-node slowdown",
    "multinode_slowdown": "multi-node slowdown",
    "gpu_hours_served": "GPU-hours served",
}


def fmt(value: float | None) -> str:
    """A number for a table cell."""
    if value is None:
        return "-"
    return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"


def delta(before: float | None, after: float | None) -> str:
    """`+0.12 (+5%)`."""
    if before is None or after is None:
        return "-"
    diff = after - before
    text = f"{diff:+.3f}".rstrip("0").rstrip(".")
    if before:
        text += f" ({diff / abs(before) * 100:+.0f}%)"
    return text


def change_items(changes: tuple[tuple[str, str, str], ...]) -> str:
    """`<li>` per target: partitions as hostlists with the nodes added and removed marked."""
    items = []
    for target, before, after in changes:
        part = node_change(target, before, after)
        if part is None:
            items.append(
                f"<li><code>{escape(target)}</code>: <code>{escape(before)}</code> &rarr; "
                f"<code>{escape(after)}</code></li>"
            )
            continue
        marks = ""
        if part.added:
            marks += f' <span class="moved moved-in">+ {escape(hostlist(part.added))}</span>'
        if part.removed:
            marks += f' <span class="moved moved-out">&minus; {escape(hostlist(part.removed))}</span>'
        items.append(
            f"<li><code>{escape(target)}</code>: <code>{escape(hostlist(part.before))}</code> &rarr; "
            f"<code>{escape(hostlist(part.after))}</code>{marks}</li>"
        )
    summary = "; ".join(m.describe() for m in moves(changes))
    moved = f'<p class="moves">Moved: <b>{escape(summary)}</b></p>' if summary else ""
    return (f"<ul>{''.join(items)}</ul>" if items else "") + moved


def _basis(effect: Effect) -> tuple[str, str, str]:
    if effect.basis == COUNTERFACTUAL:
        return (
            "without it",
            "with it",
            f"Counterfactual from the twin run: the same run from {clock(effect.after[0])} to "
            f"{clock(effect.after[1])} with this change and without it (later changes left out of both).",
        )
    return (
        "before",
        "after",
        f"Before: {clock(effect.before[0])} to {clock(effect.before[1])}; after: {clock(effect.after[0])} "
        f"to {clock(effect.after[1])} (no twin for this source: demand that moved meanwhile shows too).",
    )


def section(effects: list[Effect]) -> str:
    """Every applied change in the window with its effect table."""
    head = '<h2 id="effects">Effect of each applied change</h2>'
    if not effects:
        return head + '<p class="muted">No change was applied in the window.</p>'
    parts = [head]
    for effect in effects:
        base, new, note = _basis(effect)
        rows = []
        for pool in sorted(effect.metrics):
            for metric, (before, after) in effect.metrics[pool].items():
                if before is None and after is None:
                    continue
                bad = worse(metric, before, after, pool)
                css = ' class="regression"' if bad else ""
                flag = ' <span class="badge">worse</span>' if bad else ""
                rows.append(
                    f"<tr{css}><td>{escape(pool)}</td><td>{escape(METRIC_LABELS.get(metric, metric))}</td>"
                    f"<td class=num>{fmt(before)}</td><td class=num>{fmt(after)}</td>"
                    f"<td class=num>{escape(delta(before, after))}{flag}</td></tr>"
                )
        flagged = ""
        if effect.regressions:
            flagged = (
                '<p class="regression-flag">Regression: ' + escape("; ".join(effect.regressions)) + "</p>"
            )
        policy = f" by policy {escape(effect.policy)}" if effect.policy else ""
        css = "effect has-regression" if effect.regressions else "effect"
        parts.append(
            f'<div class="{css}"><h3>{clock(effect.at)} {escape(effect.kind)} '
            f"<code>{escape(effect.proposal_id[:12])}</code>{policy}</h3>"
            + change_items(effect.changes)
            + (f"<p>Expected: {escape(effect.expected_effect)}</p>" if effect.expected_effect else "")
            + flagged
            + f'<p class="muted">{escape(note)}</p>'
            + f'<table class="effect-table"><tr><th>pool</th><th>metric</th><th>{base}</th><th>{new}</th>'
            "<th>change</th></tr>" + "".join(rows) + "</table></div>"
        )
    return "".join(parts)
