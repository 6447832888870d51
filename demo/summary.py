"""The end-of-run summary: what was seen, proposed, applied, and what each applied change did."""

from __future__ import annotations

from collections import Counter
from typing import Any

from demo.effects import PoolWindow, measure
from demo.record import Event
from demo.run import DemoReport, describe_changes
from demo.settings import HIGH_POOL
from proposals.model import Change


def _clock(t: float) -> str:
    seconds = int(t)
    return f"+{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _fmt(value: float | None, spec: str, scale: float = 1.0, suffix: str = "") -> str:
    return "-" if value is None else f"{value * scale:{spec}}{suffix}"


def _rows(
    before: PoolWindow | None, after: PoolWindow | None, pool: str, high: bool
) -> list[tuple[str, str, str]]:
    def pair(attr: str, spec: str, scale: float = 1.0, suffix: str = "") -> tuple[str, str]:
        b = getattr(before, attr) if before is not None else None
        a = getattr(after, attr) if after is not None else None
        return _fmt(b, spec, scale, suffix), _fmt(a, spec, scale, suffix)

    rows = [
        (f"{pool} GPU utilization", *pair("utilization", ".2f")),
        (f"{pool} allocated GPUs (mean)", *pair("allocated_gpus", ".1f")),
        (f"{pool} pending GPUs (mean)", *pair("pending_gpus", ".1f")),
        (f"{pool} pending GPU-minutes per hour", *pair("pending_gpu_minutes_per_hour", ".0f")),
    ]
    if high:
        rows.append((f"{pool} multi-node iteration time", *pair("iteration_seconds", ".0f", 1000.0, " ms")))
        rows.append((f"{pool} multi-node slowdown", *pair("slowdown", ".2f", 1.0, "x")))
    return rows


def build(report: DemoReport, events: list[Event]) -> tuple[str, dict[str, Any]]:
    """The summary as text and as JSON-ready data."""
    t = report.timings
    effects = measure(report.samples, report.applied, t.effect_window_seconds, t.cycle_seconds)
    faults = [e for e in events if e.kind == "fault"]
    alerts = [e for e in events if e.kind == "alert"]
    by_alert = Counter(str(e.detail.get("alert", "?")) for e in alerts)
    congested = [e for e in alerts if e.detail.get("alert") == "IbPortCongested"]
    worst = max((float(e.detail.get("congestion", 0.0)) for e in congested), default=None)
    proposals = report.proposals
    states = Counter(str(p["state"]) for p in proposals)
    policies = Counter(str(p["proposal"]["policy"]) for p in proposals)
    approvals = [e for e in events if e.kind == "approval"]
    lines = [
        f"ibpool demo ({t.name}): {report.samples[-1].t / 3600 if report.samples else 0:.2f} simulated hours "
        f"in {report.wall_seconds:.0f} s of wall time (timings compressed; see demo.settings)",
        "",
        "Seen",
        f"  faults: {len(faults)}" + "".join(f"\n    {_clock(e.t)} {e.summary}" for e in faults),
        f"  congestion: {len(congested)} switch port(s) waiting >= 20 % of the time"
        + (f", worst {worst:.0%}, first at {_clock(congested[0].t)}" if congested else ""),
        "  alert-like events: "
        + (", ".join(f"{name} x{count}" for name, count in sorted(by_alert.items())) or "none"),
        "",
        f"Proposed: {len(proposals)}"
        + (" (" + ", ".join(f"{p} {n}" for p, n in sorted(policies.items())) + ")" if proposals else ""),
        f"  auto-approved by policy:demo: {len(approvals)}; final states: "
        + (", ".join(f"{s} {n}" for s, n in sorted(states.items())) or "none"),
        f"Applied: {len(report.applied)} (each verified by reading {report.verified_on} back)",
    ]
    if effects:
        lines += [
            "",
            "What each applied change did (before: while its evidence held; after: the next "
            f"{t.effect_window_seconds / 60:g} simulated minutes)",
        ]
    for effect in effects:
        c = effect.change
        changes = describe_changes([Change(*x) for x in c.changes])
        lines.append(f"  {_clock(c.t)} {c.kind} {c.proposal_id[:12]} by policy:{c.policy}: {changes}")
        b, a = effect.before, effect.after
        lines.append(
            f"    {'':<38} {'before':>12} {'after':>12}   "
            f"(windows {_clock(b.start)}-{_clock(b.end)}, {_clock(a.start)}-{_clock(a.end)})"
        )
        for pool in sorted(set(b.pools) | set(a.pools), key=lambda p: p != HIGH_POOL):
            for label, before, after in _rows(b.pools.get(pool), a.pools.get(pool), pool, pool == HIGH_POOL):
                lines.append(f"    {label:<38} {before:>12} {after:>12}")
    lines += ["", f"Run directory: {report.out}"]
    data = {
        "timings": t.name,
        "simulated_seconds": report.samples[-1].t if report.samples else 0.0,
        "wall_seconds": report.wall_seconds,
        "faults": [e.summary for e in faults],
        "alerts": dict(by_alert),
        "proposals": {"total": len(proposals), "by_policy": dict(policies), "states": dict(states)},
        "applied": len(report.applied),
        "effects": [e.to_dict() for e in effects],
    }
    return "\n".join(lines), data
