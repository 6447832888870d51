"""The quota backtest's table over the scenario family, and how long it took (docs/quota_backtest.md).

    python -m benchmarks.quota_backtest [--set dev|held-out|fresh|extra|fresh2|all] [--count 60] [--fresh 80]

Per scenario: the priority job's iteration time over alone with static weights, the policy and the best
fixed weights in hindsight (`ok`: within 10% and every other pool at its minimum share; `<min`: a pool
fell below it); then the shares per set (development, held-out, fresh held-out, all) and the cost to the
others. `--set extra` runs the 1,200 extra development scenarios (seeds 100-119; minutes, not in "all"),
`--set fresh2` the third held-out set (run once, on the frozen policy; not in "all").
"""

from __future__ import annotations

import sys
import time

from simulator.quota_backtest import backtest, table
from simulator.quota_backtest.backtest import GRID_HIGH, GRID_OTHERS
from simulator.quota_backtest.scenarios import options, pick


def main(argv: list[str]) -> int:
    """Print the table and the elapsed time."""
    args = options("python -m benchmarks.quota_backtest", __doc__).parse_args(argv)
    started, cpu = time.perf_counter(), time.process_time()
    rows = backtest(pick(args.set, args.count, args.fresh))
    print(table(rows, per_scenario=not args.summary))
    tables = len(GRID_HIGH) * len(GRID_OTHERS)
    print(
        f"\n{len(rows)} scenarios, each static + policy + {tables} hindsight tables, in "
        f"{time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu:.1f} s CPU (one process)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
