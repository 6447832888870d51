"""Backtest speed: a 31-day, 16-pool `ibpool backtest` (every strategy), end to end.

The 31 days are synthesized from the shared 10-day trace: its first 9 days (May 10 has no jobs at all)
are repeated back to back (9 + 9 + 9 + 4 days) with timestamps continuing minute by minute, written as a
gzip CSV in a temporary folder. `--copies N` makes a wider cluster: N copies of the 16 pools, copy c
shifted by 2c days, named `POOL_c` (a real cluster with more pools than the shared trace). The figure
covers reading that file, every strategy and writing the JSON report, as
`ibpool backtest --trace FILE [--out OUT]` does.

    .venv/bin/python -m benchmarks.backtest_speed [--trace PATH] [--days 31] [--copies 1] [--repeat 1]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from recommender.backtest import cli
from recommender.backtest.trace import Trace, load_trace

DEFAULT_TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "helios-earth-may01-10.csv.gz"
SOURCE_DAYS = 9


def synthesize(trace: Trace, days: int, out: Path, copies: int = 1) -> None:
    """Write `days` days made of the trace's first SOURCE_DAYS days repeated (`copies` day-shifted sets
    of its pools)."""
    per_day = round(1440 / trace.step_min)
    period = min(trace.steps, SOURCE_DAYS * per_day)
    sets = [(c, f"_{c}" if copies > 1 else "") for c in range(copies)]
    with gzip.open(out, "wt", newline="", compresslevel=1) as handle:
        writer = csv.writer(handle)
        writer.writerow(["time", "pool", "total_gpus", "running_gpus", "pending_gpus"])
        for step in range(days * per_day):
            stamp = (trace.start + timedelta(minutes=step * trace.step_min)).strftime("%Y-%m-%d %H:%M:%S")
            for copy, suffix in sets:
                src = (step + 2 * copy * per_day) % period
                for p, pool in enumerate(trace.pools):
                    row = (trace.capacity[p][src], trace.running[p][src], trace.pending[p][src])
                    writer.writerow([stamp, pool + suffix, *row])


def main(argv: list[str]) -> int:
    """Synthesize the trace, time the backtest, print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--copies", type=int, default=1, help="sets of the trace's pools (wider cluster)")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs (the best is reported too)")
    args = parser.parse_args(argv)
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    source = load_trace(args.trace)
    with tempfile.TemporaryDirectory() as tmp:
        synthetic, report = Path(tmp) / "synthetic.csv.gz", Path(tmp) / "report.json"
        synthesize(source, args.days, synthetic, args.copies)
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            code = cli.main(["--trace", str(synthetic), "--out", str(report), "--quiet"])
            walls.append(time.perf_counter() - start)
            if code != 0:
                print(f"backtest failed with exit code {code}", file=sys.stderr)
                return code
        figures = json.loads(report.read_text(encoding="utf-8"))
    meta = figures["meta"]
    print(
        f"backtest {meta['eval_days']:.0f} days x {meta['pools']} pools, every strategy: "
        f"{walls[-1]:.1f} s wall (best of {len(walls)}: {min(walls):.1f} s; target < 60 s)"
    )
    print(cli.format_table(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
