"""`python -m simulator.quota_backtest [--count N] [--set dev|held-out|all]`: the backtest's table."""

from __future__ import annotations

import argparse
import sys

from simulator.quota_backtest.report import backtest, table
from simulator.quota_backtest.scenarios import DEV, HELD_OUT, family


def main(argv: list[str]) -> int:
    """Print the per-scenario lines and the summary."""
    parser = argparse.ArgumentParser(prog="python -m simulator.quota_backtest", description=__doc__)
    parser.add_argument("--count", type=int, default=60, help="scenarios of the family (60)")
    parser.add_argument("--set", choices=(DEV, HELD_OUT, "all"), default="all")
    parser.add_argument("--seed", type=int, default=19)
    args = parser.parse_args(argv)
    scenarios = [s for s in family(args.count, args.seed) if args.set in ("all", s.split)]
    print(table(backtest(scenarios)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
