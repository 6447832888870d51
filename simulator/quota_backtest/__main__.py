"""`python -m simulator.quota_backtest [--set dev|held-out|fresh|extra|fresh2|all]`: the backtest's table."""

from __future__ import annotations

import sys

from simulator.quota_backtest.report import backtest, table
from simulator.quota_backtest.scenarios import QuotaScenario, options, pick


def main(argv: list[str]) -> int:
    """Print the per-scenario lines and the summary."""
    args = options("python -m simulator.quota_backtest", __doc__).parse_args(argv)
    scenarios: list[QuotaScenario] = pick(args.set, args.count, args.fresh)
    print(table(backtest(scenarios), per_scenario=not args.summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
