"""IB scrape cost: `ibpool exporter --no-collector.gpu` against node_exporter on the same sysfs tree.

Generates a DGX-like tree (8 HCAs, full `counters` and `hw_counters`), starts both servers, and scrapes
them alternately over keep-alive connections (as Prometheus does), with and without gzip, then over a
new connection per scrape (as curl does). Prints p50/p99 wall time per scrape, the ratio ours/theirs,
CPU per scrape and resident memory of each server.

    .venv/bin/python -m benchmarks.scrape_vs_node_exporter [--scrapes 1000] [--sysfs DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scrape_client import Scraper, Summary, cpu_seconds, free_port, rss_bytes, start, stop
from simulator.sysfs_tree import SysfsTree, dgx_hcas


def _fresh_connection_scrape(port: int) -> float:
    scraper = Scraper(port)
    elapsed, _ = scraper.scrape()
    scraper.conn.close()
    return elapsed


def main(argv: list[str]) -> int:
    """Run the comparison and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scrapes", type=int, default=1000)
    parser.add_argument("--sysfs", type=Path, help="an existing sysfs root (default: a generated DGX tree)")
    args = parser.parse_args(argv)
    node_exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if node_exporter is None:
        print("node_exporter is not installed (Debian: prometheus-node-exporter)", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="ibpool-bench-"))
    root = args.sysfs
    if root is None:
        SysfsTree(tmp / "sys", dgx_hcas(8))
        root = tmp / "sys"
    ours_port, theirs_port = free_port(), free_port()
    ours = start(
        [
            sys.executable,
            "-m",
            "ibpool",
            "exporter",
            "--no-collector.gpu",
            "--sysfs-root",
            str(root),
            "--web.listen-address",
            f"127.0.0.1:{ours_port}",
            "--log.level",
            "warning",
        ],
        ours_port,
    )
    theirs = start(
        [
            node_exporter,
            f"--web.listen-address=127.0.0.1:{theirs_port}",
            f"--path.sysfs={root}",
            "--collector.disable-defaults",
            "--collector.infiniband",
            "--log.level=warn",
        ],
        theirs_port,
    )
    try:
        _report(args.scrapes, ours, ours_port, theirs, theirs_port)
    finally:
        stop(ours)
        stop(theirs)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _report(scrapes: int, ours: object, ours_port: int, theirs: object, theirs_port: int) -> None:
    assert isinstance(ours, subprocess.Popen) and isinstance(theirs, subprocess.Popen)
    for gzip in (False, True):
        a, b = Scraper(ours_port, gzip=gzip), Scraper(theirs_port, gzip=gzip)
        for _ in range(50):  # warm up: open fds, caches, Go's runtime
            a.scrape()
            b.scrape()
        times_a: list[float] = []
        times_b: list[float] = []
        cpu_a0, cpu_b0 = cpu_seconds(ours.pid), cpu_seconds(theirs.pid)
        for _ in range(scrapes):
            times_a.append(a.scrape()[0])
            times_b.append(b.scrape()[0])
        cpu_a = (cpu_seconds(ours.pid) - cpu_a0) / scrapes * 1000
        cpu_b = (cpu_seconds(theirs.pid) - cpu_b0) / scrapes * 1000
        sa, sb = Summary.of(times_a), Summary.of(times_b)
        label = "keep-alive, gzip" if gzip else "keep-alive, plain"
        print(f"[{label}] {scrapes} scrapes each, alternating")
        print(f"  ibpool        {sa}  cpu {cpu_a:.3f} ms/scrape  body {len(a.scrape()[1])} B")
        print(f"  node_exporter {sb}  cpu {cpu_b:.3f} ms/scrape  body {len(b.scrape()[1])} B")
        print(f"  ratio ibpool/node_exporter: p50 {sa.p50 / sb.p50:.2f}  p99 {sa.p99 / sb.p99:.2f}")
    fresh_a: list[float] = []
    fresh_b: list[float] = []
    for _ in range(max(50, scrapes // 5)):
        fresh_a.append(_fresh_connection_scrape(ours_port))
        fresh_b.append(_fresh_connection_scrape(theirs_port))
    sa, sb = Summary.of(fresh_a), Summary.of(fresh_b)
    print(f"[new connection per scrape] {len(fresh_a)} scrapes each")
    print(f"  ibpool        {sa}")
    print(f"  node_exporter {sb}")
    print(f"  ratio ibpool/node_exporter: p50 {sa.p50 / sb.p50:.2f}")
    time.sleep(0.2)
    print(
        f"resident memory: ibpool {rss_bytes(ours.pid) / 2**20:.1f} MiB, "
        f"node_exporter {rss_bytes(theirs.pid) / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
