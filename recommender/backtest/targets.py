"""The rebalancing targets (issue #18) and the policy's verdict against them, for one backtest report.

One definition for `ibpool backtest` (printed and written as `policy.targets`) and the evaluation protocol
(`benchmarks/backtest_protocol.py`). The stand-ins are judged against the budgeted reference plan
(`ceiling`); a cluster's own weeks also against the coverage asked of a busier cluster (`coverage`), which
the protocol does not judge (its stand-ins' own reference falls short of it). docs/backtest.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WITHIN_CEILING = 0.10  # coverage beyond static at most this far under the reference plan
MOVES = 0.5  # moves per pool-day
REVERSALS_30D = 1.0  # nodes moved back within 60 minutes, per 30 days
P95, P99 = 1.05, 1.5  # worst pool's wait ratio against static
COVERAGE = 0.85  # coverage of all pending GPU-minutes on a busier cluster's weeks

RELATIVE = ("ceiling", "moves", "reversals", "p95", "p99")  # what the protocol's items are judged on


@dataclass(frozen=True, slots=True)
class Check:
    """One target: what was measured and its limit, a floor (`at_least`) or a ceiling."""

    name: str
    what: str
    value: float
    limit: float
    at_least: bool = False

    @property
    def met(self) -> bool:
        """Whether the value is on the right side of the limit (reaching it exactly is met)."""
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    def as_dict(self) -> dict[str, Any]:
        """Plain values for the JSON report."""
        return {"what": self.what, "value": self.value, "limit": self.limit, "met": self.met}


def checks(report: dict[str, Any]) -> list[Check]:
    """The policy against every target (`ceiling` only when the report has the reference plan)."""
    policy = report["policy"]
    out: list[Check] = []
    if "reference" in report:
        floor = report["reference"]["coverage_beyond_static"] - WITHIN_CEILING
        what = "coverage beyond static, within 10 points of the reference plan"
        out.append(Check("ceiling", what, policy["coverage_beyond_static"], floor, at_least=True))
    wait = "worst pool {} wait ratio against static"
    reversals = policy["reversals_within_60min_per_30_days"]
    out += [
        Check("moves", "moves per pool-day", policy["moves_per_pool_day"], MOVES),
        Check("reversals", "reversals per 30 days", reversals, REVERSALS_30D),
        Check("p95", wait.format("p95"), policy["worst_pool_p95_wait_ratio_vs_static"], P95),
        Check("p99", wait.format("p99"), policy["worst_pool_p99_wait_ratio_vs_static"], P99),
    ]
    busier = "coverage (a busier cluster's weeks)"
    out.append(Check("coverage", busier, policy["coverage"], COVERAGE, at_least=True))
    return out


def verdict(report: dict[str, Any]) -> dict[str, bool]:
    """Which of the protocol's targets (`RELATIVE`) the policy meets on one item."""
    return {c.name: c.met for c in checks(report) if c.name in RELATIVE}
