"""Per-scrape cost of the InfiniBand collector + render() on a generated DGX-like sysfs tree.

Prints wall and CPU time per collect()+render() (median and p99 over --runs runs), the number of samples,
and the open fds, for both change-detection modes: `stat` (what a tree on an ordinary filesystem gets)
and `sysfs` (what the kernel's tree gets: no directory checks below class/infiniband). `--profile` adds
a cProfile listing of the sysfs-mode loop.

    .venv/bin/python -m benchmarks.ib_collect_profile [--runs 2000] [--hcas 8] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

from exporter.collectors.infiniband import InfinibandCollector
from exporter.sources.ib_sysfs import ChangeDetection, InfinibandSysfsSource
from foundation.exposition import render
from simulator.sysfs_tree import SysfsTree, dgx_hcas

_WARMUP = 50


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(seconds: list[float]) -> str:
    return f"median {statistics.median(seconds) * 1e3:.3f} ms p99 {_quantile(seconds, 0.99) * 1e3:.3f} ms"


def measure(root: str, mode: ChangeDetection, runs: int) -> tuple[list[float], list[float], int, int]:
    """(wall seconds, CPU seconds) per collect()+render(), the sample count and the open fds."""
    source = InfinibandSysfsSource(root, change_detection=mode)
    collector = InfinibandCollector(source)
    text = ""
    for _ in range(_WARMUP):
        text = render(collector.collect())
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.thread_time()
        text = render(collector.collect())
        cpus.append(time.thread_time() - c0)
        walls.append(time.perf_counter() - w0)
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    fds = source.open_fds()
    collector.close()
    return walls, cpus, samples, fds


def profile(root: str, runs: int) -> None:
    """cProfile the sysfs-mode loop and print the top entries by internal time."""
    collector = InfinibandCollector(InfinibandSysfsSource(root, change_detection="sysfs"))
    render(collector.collect())
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        render(collector.collect())
    profiler.disable()
    collector.close()
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    """Build the tree, measure both modes, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--hcas", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ib-bench-") as tmp:
        SysfsTree(tmp, dgx_hcas(args.hcas))
        time.sleep(0.1)  # let the tree's mtimes age past the racy window
        files = sum(1 for p in Path(tmp, "devices").rglob("*") if p.is_file())
        print(f"tree: {args.hcas} HCAs, {files} files; {args.runs} runs of collect()+render()")
        for mode in ("stat", "sysfs"):
            walls, cpus, samples, fds = measure(tmp, mode, args.runs)
            print(f"{mode:5s}: wall {_summary(walls)} | cpu {_summary(cpus)} | {samples} samples, {fds} fds")
        if args.profile:
            profile(tmp, min(args.runs, 500))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
