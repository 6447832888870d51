"""`python -m simulator.quota_backtest [--set dev|held-out|fresh|extra|fresh2|all]`: the backtest's table."""

from __future__ import annotations

import argparse
import sys

from simulator.quota_backtest.report import backtest, table
from simulator.quota_backtest.scenarios import SPLITS, QuotaScenario, pick


def main(argv: list[str]) -> int:
    """Print the per-scenario lines and the summary."""
    parser = argparse.ArgumentParser(prog="python -m simulator.quota_backtest", description=__doc__)
    parser.add_argument("--set", choices=(*SPLITS, "all"), default="all")
    parser.add_argument(
        "--count", type=int, default=60, help="scenarios from each seed but the fresh one (60)"
    )
    parser.add_argument(
        "--fresh", type=int, default=None, help="scenarios of the fresh (and fresh2) set (80)"
    )
    parser.add_argument("--summary", action="store_true", help="the summary only, no line per scenario")
    args = parser.parse_args(argv)
    scenarios: list[QuotaScenario] = pick(args.set, args.count, args.fresh)
    print(table(backtest(scenarios), per_scenario=not args.summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
