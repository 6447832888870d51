"""Whole-node scrape cost: `ibpool exporter --simulate` (8 GPUs behind the NVML fake, 8 NDR ports).

Prints p50/p99 wall milliseconds per scrape, the exporter's CPU milliseconds per scrape and its resident
memory. The simulation's own ticking is slowed to once an hour during the run so that its CPU is not
counted as scrape cost; the fake NVML's Python cost is included (a real driver's calls cost differently).

    .venv/bin/python -m benchmarks.simulated_node_scrape [--scrapes 500]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.scrape_client import Scraper, Summary, cpu_seconds, free_port, rss_bytes, start, stop


def main(argv: list[str]) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args(argv)
    port = free_port()
    proc = start(
        [
            sys.executable,
            "-m",
            "ibpool",
            "exporter",
            "--simulate",
            "--simulate.step-seconds",
            "3600",
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--log.level",
            "warning",
        ],
        port,
    )
    try:
        scraper = Scraper(port, gzip=args.gzip)
        for _ in range(20):
            scraper.scrape()
        times: list[float] = []
        cpu0 = cpu_seconds(proc.pid)
        for _ in range(args.scrapes):
            times.append(scraper.scrape()[0])
        cpu = (cpu_seconds(proc.pid) - cpu0) / args.scrapes * 1000
        body = scraper.scrape()[1]
        samples = sum(1 for line in body.decode(errors="replace").splitlines() if line and line[0] != "#")
        print(
            f"simulated node (8 GPUs, 8 ports), {args.scrapes} scrapes over keep-alive"
            f"{' with gzip' if args.gzip else ''}:"
        )
        print(f"  {Summary.of(times)}  cpu {cpu:.3f} ms/scrape  {len(body)} B, {samples} samples")
        print(f"  resident memory {rss_bytes(proc.pid) / 2**20:.1f} MiB")
    finally:
        stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
