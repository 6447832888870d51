"""A full node at fleet speed: `ibpool exporter --simulate` with 8 H200s whose NVML calls take as long as
on a real H200 (docs/nvml-h200.md) and 8 NDR ports, scraped over HTTP.

Prints `/metrics` p50/p99 while the GPUs are sampled in the background, back to back (as the H200 figures
were taken) and paced (`--rate` a second, so that scrapes land at every point of the sampling cycle), the
NVML time per second the exporter spends (its own `ibpool_gpu_nvml_read_seconds_total`), its CPU and
resident memory, then paced scrapes while GPU 3 stalls in the driver for `--stall-seconds`: how long they
take, and whether GPU 3 is reported stale and the seven others fresh once the deadline has passed.

    .venv/bin/python -m benchmarks.gpu_node_speed [--scrapes 300] [--rate 20] [--stall-seconds 10]
        [--costs h200|h200-serial|none] [--sample-interval 1] [--deadline 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.scrape_client import Scraper, Summary, cpu_seconds, free_port, rss_bytes, start, stop

GPUS = 8


def by_gpu(body: bytes, name: str) -> dict[str, float]:
    """Samples of `name` keyed by their gpu label."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels["gpu"]] = sample.value
    return out


def value(body: bytes, name: str) -> float | None:
    """The value of an unlabelled sample, or None."""
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    return None


def paced(scraper: Scraper, count: int, rate: float, on_body: Callable[[float, bytes], None]) -> list[float]:
    """`count` scrapes, one every 1/`rate` seconds; returns their durations."""
    times: list[float] = []
    next_at = time.monotonic()
    for _ in range(count):
        next_at += 1.0 / rate
        seconds, body = scraper.scrape()
        times.append(seconds)
        on_body(time.monotonic(), body)
        time.sleep(max(0.0, next_at - time.monotonic()))
    return times


def wait_sampled(scraper: Scraper, timeout: float = 30.0) -> None:
    """Until every GPU is up with its first utilization average and GPM ratios."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = scraper.scrape()[1]
        if len(by_gpu(body, "ibpool_gpu_sm_active_ratio")) == GPUS and set(
            by_gpu(body, "ibpool_gpu_up").values()
        ) == {1.0}:
            return
        time.sleep(0.2)
    raise RuntimeError("the GPUs were not sampled in time")


def main(argv: list[str]) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--rate", type=float, default=20.0, help="scrapes per second")
    parser.add_argument("--stall-seconds", type=float, default=10.0)
    parser.add_argument("--costs", default="h200", choices=("h200", "h200-serial", "none"))
    parser.add_argument(
        "--sample-interval", type=float, default=1.0, help="0: read at each scrape (as before)"
    )
    parser.add_argument("--deadline", type=float, default=2.0)
    args = parser.parse_args(argv)
    port = free_port()
    proc = start(
        [
            sys.executable,
            "-m",
            "ibpool",
            "exporter",
            "--simulate",
            "--simulate.nvml-costs",
            args.costs,
            "--simulate.step-seconds",
            "3600",
            "--gpu.sample-interval-seconds",
            str(args.sample_interval),
            "--gpu.deadline-seconds",
            str(args.deadline),
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--log.level",
            "warning",
        ],
        port,
    )
    try:
        scraper = Scraper(port)
        wait_sampled(scraper)
        back_to_back = [scraper.scrape()[0] for _ in range(args.scrapes)]
        body = scraper.scrape()[1]
        read0, t0, cpu0 = (
            sum(by_gpu(body, "ibpool_gpu_nvml_read_seconds_total").values()),
            time.monotonic(),
            cpu_seconds(proc.pid),
        )
        times = paced(scraper, args.scrapes, args.rate, lambda _t, _b: None)
        body = scraper.scrape()[1]
        elapsed = time.monotonic() - t0
        nvml_per_second = (sum(by_gpu(body, "ibpool_gpu_nvml_read_seconds_total").values()) - read0) / elapsed
        cpu = (cpu_seconds(proc.pid) - cpu0) / elapsed
        samples = sum(1 for line in body.decode().splitlines() if line and line[0] != "#")
        print(
            f"simulated node: {GPUS} H200s (NVML costs: {args.costs}), 8 NDR ports; sampled every "
            f"{args.sample_interval:g} s, deadline {args.deadline:g} s; "
            f"{args.scrapes} scrapes at {args.rate:g}/s"
        )
        print(f"  /metrics back to back: {Summary.of(back_to_back)}  ({len(body)} B, {samples} samples)")
        print(f"  /metrics paced: {Summary.of(times)}")
        scrapes = value(body, "ibpool_exporter_scrapes_total") or 1
        served = (value(body, "ibpool_exporter_scrape_duration_seconds_total") or 0) / scrapes
        print(
            f"  the exporter's own mean time to answer: {served * 1000:.2f} ms; "
            f"machine load average {os.getloadavg()[0]:.1f}"
        )
        print(
            f"  NVML read time: {nvml_per_second * 1000:.1f} ms per second for {GPUS} GPUs "
            f"({nvml_per_second * 1000 / GPUS:.1f} ms/s per GPU); exporter CPU {cpu * 100:.1f}% of a core"
        )
        reported = value(body, "process_resident_memory_bytes") or 0
        print(
            f"  resident memory: {rss_bytes(proc.pid) / 2**20:.1f} MiB (process_resident_memory_bytes "
            f"{reported / 2**20:.1f} MiB)"
        )
        stall(scraper, port, args)
        print(f"  resident memory after the stall: {rss_bytes(proc.pid) / 2**20:.1f} MiB")
    finally:
        stop(proc)
    return 0


def stall(scraper: Scraper, port: int, args: argparse.Namespace) -> None:
    """Stall GPU 3 and scrape through the stall."""
    fault = Scraper(port, path=f"/-/simulate/fault?kind=stall_gpu&gpu=3&value={args.stall_seconds:g}")
    fault.conn.request("POST", fault.path)
    fault.conn.getresponse().read()
    began = time.monotonic()
    bodies: list[tuple[float, bytes]] = []
    count = int(args.stall_seconds * args.rate)
    times = paced(scraper, count, args.rate, lambda now, body: bodies.append((now, body)))
    # judged afterwards, so that parsing does not take CPU from the exporter while it is measured:
    # scrapes after the deadline (plus one interval for the read in flight) and before the stall ends
    judged = [
        by_gpu(body, "ibpool_gpu_sample_stale")
        for now, body in bodies
        if began + args.deadline + args.sample_interval < now < began + args.stall_seconds
    ]
    expected = sum(stale == {str(i): float(i == 3) for i in range(GPUS)} for stale in judged)
    print(f"  while GPU 3 stalls for {args.stall_seconds:g} s: /metrics {Summary.of(times)}")
    print(
        f"  GPU 3 stale and the other {GPUS - 1} fresh in {expected} of the {len(judged)} "
        f"scrapes between the deadline and the end of the stall"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
