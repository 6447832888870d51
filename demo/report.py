"""The end-of-run summary: did the loop help, at what cost; then what was seen, proposed and applied.

First the loop against its static twin (the same seed without the loop's changes, `demo.twin`): GPU
allocation and utilization per pool and overall, GPU-hours served, job wait p50/p95/p99, pending
GPU-minutes, and the priority job's iteration time against running alone. Then the faults, the alerts the
rule engine fired from the shipped rules (severity, how long), the proposals and applied changes, and per
change its counterfactual (with it against without it over the next hour), regressions marked. Every
time is on the run's clock (`postmortem.model.clock`), as in the progress lines and the report.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from demo.alert_replay import AlertReplay
from demo.loop import LoopReport
from demo.measure import OVERALL, Measurement, PoolResult
from demo.record import Event
from demo.settings import HIGH_POOL
from demo.twin import ChangeEffect, TwinResult
from postmortem.changes import describe
from postmortem.model import clock, duration_text


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else f"{value:{spec}}"


def _points(before: float | None, after: float | None) -> str:
    return "-" if before is None or after is None else f"{(after - before) * 100:+.1f} pts"


def _relative(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "-"
    if not before:
        return "+0%" if not after else "new"
    return f"{(after - before) / abs(before):+.0%}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _waits(result: PoolResult | None) -> str:
    if result is None:
        return "-"
    return " / ".join(
        _num(v, ".0f") for v in (result.wait_p50_minutes, result.wait_p95_minutes, result.wait_p99_minutes)
    )


def comparison_rows(static: Measurement, loop: Measurement) -> list[tuple[str, str, str, str]]:
    """(metric, static, loop, change) rows, overall first then each pool."""
    pools = [OVERALL, *sorted(p for p in loop.pools if p != OVERALL)]
    rows: list[tuple[str, str, str, str]] = []
    for label, attr, fmt, delta in (
        ("GPU allocation", "allocation", _pct, _points),
        ("GPU utilization", "utilization", _pct, _points),
        ("GPU-hours served", "gpu_hours_served", _num, _relative),
        ("pending GPU-minutes", "pending_gpu_minutes", _num, _relative),
        (
            "multi-node slowdown",
            "multinode_slowdown",
            lambda v: _num(v, ".2f") + "x" if v else "-",
            _relative,
        ),
    ):
        for pool in pools:
            s, lp = static.pools.get(pool), loop.pools.get(pool)
            b = getattr(s, attr) if s is not None else None
            a = getattr(lp, attr) if lp is not None else None
            rows.append((f"{label}, {pool}", fmt(b), fmt(a), delta(b, a)))
    for pool in pools:
        s, lp = static.pools.get(pool), loop.pools.get(pool)
        change = "-"
        if (
            s is not None
            and lp is not None
            and s.wait_p95_minutes is not None
            and lp.wait_p95_minutes is not None
        ):
            change = f"p95 {_relative(s.wait_p95_minutes, lp.wait_p95_minutes)}"
        rows.append((f"job wait p50/p95/p99 (min), {pool}", _waits(s), _waits(lp), change))
    sp, lpj = static.priority, loop.priority

    def pace(p: Any) -> str:
        if p.iteration_seconds is None:
            return "did not run"
        return f"{p.iteration_seconds * 1000:.0f} ms (x{p.slowdown:.2f})"

    rows.append(
        (
            f"priority job {lpj.name} iteration (x alone)",
            pace(sp),
            pace(lpj),
            _relative(sp.iteration_seconds, lpj.iteration_seconds),
        )
    )
    return rows


def comparison_text(twins: TwinResult, hours: float) -> list[str]:
    """The loop-vs-static table as console lines."""
    lines = [
        f"Did the loop help? The same {hours:g} simulated hours twice, same seed, demand, jobs and faults: "
        "static (partitions and QoS tables left as configured) is the baseline.",
        f"  {'':<52} {'static':>18} {'loop':>18} {'change':>12}",
    ]
    for label, static, loop, change in comparison_rows(twins.static, twins.loop):
        lines.append(f"  {label:<52} {static:>18} {loop:>18} {change:>12}")
    alone = twins.loop.priority.alone_seconds
    if alone:
        lines.append(
            f"  ({twins.loop.priority.name} alone on an idle fabric: {alone * 1000:.0f} ms an iteration)"
        )
    if not twins.replay_matches:
        lines.append(f"  WARNING: {twins.mismatch}; the loop column is the replay's")
    return lines


def effect_lines(effect: ChangeEffect, start_unix: float) -> list[str]:
    """One change's counterfactual: with it against without it, per pool, regressions marked."""
    lines = [
        f"    with it vs without it, {clock(start_unix + effect.start)} to {clock(start_unix + effect.end)} "
        "(later changes left out of both):"
    ]
    if effect.end - effect.start < 60:
        return [*lines[:0], "    (applied at the end of the run: no time left to follow it)"]
    pools = sorted(set(effect.with_change.pools) & set(effect.without.pools), key=lambda p: (p != OVERALL, p))
    for pool in pools:
        a, b = effect.with_change.pools[pool], effect.without.pools[pool]
        slow_a = "-" if a.multinode_slowdown is None else f"{a.multinode_slowdown:.2f}x"
        slow_b = "-" if b.multinode_slowdown is None else f"{b.multinode_slowdown:.2f}x"
        lines.append(
            f"      {pool:<8} allocation {_pct(b.allocation)} -> {_pct(a.allocation)}, "
            f"GPU-h {_num(b.gpu_hours_served)} -> {_num(a.gpu_hours_served)}, "
            f"pending GPU-min {_num(b.pending_gpu_minutes)} -> {_num(a.pending_gpu_minutes)}, "
            f"slowdown {slow_b} -> {slow_a}"
        )
    for item in effect.regressions:
        lines.append(f"      REGRESSION: {item.describe()}")
    if not effect.regressions:
        lines.append("      no regression (nothing worse beyond the tolerances of postmortem.regressions)")
    return lines


def alert_lines(alerts: AlertReplay, start_unix: float) -> list[str]:
    """The replayed alerts, or why there are none."""
    if not alerts.replayed:
        return [f"  alerts {alerts.status}"]
    counts = Counter(f"{f['name']} ({f['severity']})" for f in alerts.firings)
    lines = [
        f"  alerts (vmalert replaying {', '.join(alerts.rules)} over the run's series): "
        + (", ".join(f"{name} x{n}" for name, n in sorted(counts.items())) or "none fired")
    ]
    for f in alerts.firings:
        end = "still firing at the end" if f["end"] is None else f"to {clock(f['end'])}"
        labels = ",".join(f"{k}={v}" for k, v in sorted(f["labels"].items()) if k not in ("job", "instance"))
        lines.append(
            f"    {clock(f['start'])} {f['name']} {f['severity']} {labels} "
            f"for {duration_text(f['duration'])} ({end})"
        )
    return lines


def build(
    report: LoopReport, events: list[Event], twins: TwinResult, alerts: AlertReplay
) -> tuple[str, dict[str, Any]]:
    """The summary as text and as JSON-ready data."""
    t = report.timings
    start = report.start_unix
    faults = [e for e in events if e.kind == "fault"]
    proposals = report.proposals
    states = Counter(str(p["state"]) for p in proposals)
    policies = Counter(str(p["proposal"]["policy"]) for p in proposals)
    approvals = [e for e in events if e.kind == "approval"]
    hours = t.duration_seconds / 3600.0
    lines = [
        f"ibpool demo ({t.name}): {hours:g} simulated hours from {clock(start)} (UTC, the run's clock) "
        f"in {report.wall_seconds:.0f} s of wall time (timings compressed; see demo.settings)",
        "",
        *comparison_text(twins, hours),
        "",
        "Seen",
        f"  faults: {len(faults)}" + "".join(f"\n    {clock(start + e.t)} {e.summary}" for e in faults),
        *alert_lines(alerts, start),
        "",
        f"Proposed: {len(proposals)}"
        + (" (" + ", ".join(f"{p} {n}" for p, n in sorted(policies.items())) + ")" if proposals else ""),
        f"  auto-approved by policy:demo: {len(approvals)}; final states: "
        + (", ".join(f"{s} {n}" for s, n in sorted(states.items())) or "none"),
        f"Applied: {len(report.applied)} (each verified by reading {report.verified_on} back)",
    ]
    effects = {e.tag: e for e in twins.effects}
    if report.applied:
        lines += [
            "",
            f"What each applied change did (counterfactual, {t.effect_window_seconds / 60:g} min after it)",
        ]
    for change in report.applied:
        lines.append(
            f"  {clock(start + change.t)} {change.kind} {change.proposal_id[:12]} by policy:{change.policy}: "
            f"{describe(change.changes, 160)}"
        )
        if change.proposal_id in effects:
            lines += effect_lines(effects[change.proposal_id], start)
    lines += ["", f"Run directory: {report.out}"]
    regressions = sum(len(e.regressions) for e in twins.effects)
    high = twins.loop.pools.get(HIGH_POOL)
    data = {
        "timings": t.name,
        "start": start,
        "simulated_seconds": t.duration_seconds,
        "wall_seconds": report.wall_seconds,
        "faults": [e.summary for e in faults],
        "alerts": {"status": alerts.status, "fired": dict(Counter(f["name"] for f in alerts.firings))},
        "proposals": {"total": len(proposals), "by_policy": dict(policies), "states": dict(states)},
        "applied": len(report.applied),
        "regressions": regressions,
        "comparison": [
            {"metric": m, "static": s, "loop": lp, "change": c}
            for m, s, lp, c in comparison_rows(twins.static, twins.loop)
        ],
        "high_pool_wait_p95": None if high is None else high.wait_p95_minutes,
    }
    return "\n".join(lines), data
