"""The backtest over the family: per scenario the three strategies, then the table the issue asks for.

Success on a scenario: the priority job within 10% of its time alone and every other pool at its minimum
share throughout (`Outcome.ok`). The table gives, per set (development, held-out, fresh held-out, all):
the share of scenarios each strategy succeeds on; where the best fixed weights in hindsight succeed, the
share the policy succeeds on too (target >= 90%); how often the policy took another pool below its
minimum share (target 0); and the cost to the others (their jobs' mean slowdown under each strategy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simulator.quota_backtest.backtest import HINDSIGHT, POLICY, STATIC, Outcome, hindsight, run
from simulator.quota_backtest.scenarios import SPLITS, QuotaScenario


@dataclass(frozen=True)
class Row:
    """One scenario's three outcomes."""

    scenario: QuotaScenario
    static: Outcome
    policy: Outcome
    hindsight: Outcome


def backtest(scenarios: Sequence[QuotaScenario], progress: Callable[[Row], None] | None = None) -> list[Row]:
    """Run every scenario three ways."""
    rows = []
    for scenario in scenarios:
        row = Row(scenario, run(scenario, STATIC), run(scenario, POLICY), hindsight(scenario))
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({count / total:.0%})" if total else "-"


def _mean(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{sum(known) / len(known):.2f}x" if known else "-"


def summary(rows: Sequence[Row]) -> dict[str, object]:
    """The figures of one set of rows."""
    feasible = [r for r in rows if r.hindsight.ok]
    return {
        "scenarios": len(rows),
        "static_ok": sum(r.static.ok for r in rows),
        "policy_ok": sum(r.policy.ok for r in rows),
        "hindsight_ok": len(feasible),
        "policy_ok_where_hindsight_ok": sum(r.policy.ok for r in feasible),
        "policy_below_min_share": sum(not r.policy.min_share_kept for r in rows),
        "static_below_min_share": sum(not r.static.min_share_kept for r in rows),
        "congested": sum(r.static.congested_links > 0 for r in rows),
    }


def by_split(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """The rows of each split present (in `SPLITS` order), then all of them."""
    sets = [(name, [r for r in rows if r.scenario.split == name]) for name in SPLITS]
    return [(name, subset) for name, subset in sets if subset] + [("all", list(rows))]


def table(rows: Sequence[Row], per_scenario: bool = True) -> str:
    """The per-scenario lines (unless `per_scenario` is False) and the summary table."""

    def mark(o: Outcome) -> str:
        slow = "-" if o.hi_slowdown is None else f"{o.hi_slowdown:.2f}x"
        return f"{slow}{' ok' if o.ok else ''}{'' if o.min_share_kept else ' <min'}"

    lines = (
        [f"{'scenario':<32} {'cong':>4} {'static':>12} {'policy':>12} {'hindsight':>12}   policy's weights"]
        if per_scenario
        else []
    )
    for r in rows if per_scenario else ():
        lines.append(
            f"{r.scenario.name:<32} {r.static.congested_links:>4} {mark(r.static):>12} {mark(r.policy):>12} "
            f"{mark(r.hindsight):>12}   {r.policy.weights.split(',4:')[0]} ({r.policy.changes} changes)"
        )
    if per_scenario:
        lines.append("")
    lines += [
        "priority job within 10% of alone and every other pool at its minimum share (scenarios)",
        f"{'set':<10} {'n':>4} {'congested':>9} {'static':>14} {'policy':>14} {'hindsight':>14} "
        f"{'policy where hindsight ok':>26} {'policy <min share':>18}",
    ]
    for name, subset in by_split(rows):
        s = summary(subset)
        total = int(str(s["scenarios"]))
        lines.append(
            f"{name:<10} {total:>4} {s['congested']!s:>9} {_share(int(str(s['static_ok'])), total):>14} "
            f"{_share(int(str(s['policy_ok'])), total):>14} {_share(int(str(s['hindsight_ok'])), total):>14} "
            f"{_share(int(str(s['policy_ok_where_hindsight_ok'])), int(str(s['hindsight_ok']))):>26} "
            f"{s['policy_below_min_share']!s:>18}"
        )
    lines += [
        "",
        "cost to the others (their jobs' mean slowdown against alone, congested scenarios)",
        f"{'set':<10} {STATIC:>10} {POLICY:>10} {HINDSIGHT:>10}",
    ]
    for name, every in by_split(rows):
        subset = [r for r in every if r.static.congested_links > 0]
        lines.append(
            f"{name:<10} {_mean([r.static.others_slowdown for r in subset]):>10} "
            f"{_mean([r.policy.others_slowdown for r in subset]):>10} "
            f"{_mean([r.hindsight.others_slowdown for r in subset]):>10}"
        )
    return "\n".join(lines)
