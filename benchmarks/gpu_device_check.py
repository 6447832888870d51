"""Device check for the GPU collector: real NVML (default) or the simulated GPUs (`--fake N`).

    .venv/bin/python benchmarks/gpu_device_check.py [--interval 2] [--repeat 20] [--quiet] [--fake 8]

Builds the collector on `pynvml`, scrapes twice `--interval` seconds apart, prints the second exposition,
which catalog GPU metrics the GPU(s) support (present/absent, with sample counts), the NVML errors seen, and
the time of each scrape (plus p50/p90 over `--repeat` more back-to-back scrapes). Exits 0, also where NVML
is unavailable (it prints why).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pynvml

from exporter import catalog
from exporter.collectors.gpu import GpuCollector, build_gpu_collector
from exporter.errors import SourceError
from exporter.sources.nvml_source import Nvml
from foundation.exposition import MetricFamily, MetricSpec, render
from simulator.fake_nvml import FakeNvml


def gpu_specs() -> list[MetricSpec]:
    """The catalog's GPU metrics this collector writes, and the NVML error counter."""
    specs = [s for n, s in vars(catalog).items() if n.startswith("GPU_") and isinstance(s, MetricSpec)]
    return [s for s in specs if s is not catalog.GPU_JOB_INFO] + [catalog.NVML_ERRORS]


def fake_nvml(gpus: int) -> FakeNvml:
    """Simulated GPUs on the real clock, with a random steady load."""
    rng = random.Random(1)
    nvml = FakeNvml(gpu_count=gpus, clock=time.monotonic)
    for i in range(gpus):
        nvml.set_load(
            i,
            utilization=rng.random(),
            memory_bandwidth=rng.random(),
            sm_active=rng.random(),
            tensor_active=rng.random(),
            memory_used_bytes=rng.randrange(1 << 36),
            nvlink_tx=rng.random(),
            nvlink_rx=rng.random(),
        )
    return nvml


def timed(collector: GpuCollector) -> tuple[list[MetricFamily], float]:
    """One scrape and its duration in seconds."""
    start = time.perf_counter()
    families = collector.collect()
    return families, time.perf_counter() - start


def summary(families: list[MetricFamily]) -> list[str]:
    """One line per metric: present (with its sample count) or absent."""
    counts: dict[str, int] = {}
    for family in families:
        counts[family.spec.name] = counts.get(family.spec.name, 0) + len(family.samples)
    lines = []
    for spec in gpu_specs():
        n = counts.get(spec.name, 0)
        lines.append(f"  {'present' if n else 'ABSENT '}  {spec.name:<52} {n:>4} samples")
    return lines


def report(collector: GpuCollector, families: list[MetricFamily], times: list[float], quiet: bool) -> None:
    """Print the exposition, the support summary, errors and timings."""
    if not quiet:
        print(render(families), end="")
    print(f"# GPUs: {len(collector.readings.readings())}")
    print("# catalog GPU metrics on this machine:")
    print("\n".join(summary(families)))
    errors = collector.errors.snapshot()
    print(f"# NVML errors: {errors if errors else 'none'}")
    if collector.xid is not None:
        watched = list(collector.xid.registered_gpus)
        print(f"# XID watcher alive: {collector.xid.is_alive()}, GPUs watched: {watched}")
    print(f"# scrape 1 (opens NVML, static facts): {times[0] * 1e3:.2f} ms")
    print(f"# scrape 2: {times[1] * 1e3:.2f} ms")
    if len(times) > 2:
        rest = sorted(times[2:])
        p90 = rest[min(len(rest) - 1, int(0.9 * len(rest)))]
        print(
            f"# {len(rest)} more scrapes: p50 {statistics.median(rest) * 1e3:.2f} ms, p90 {p90 * 1e3:.2f} ms"
        )


def main(argv: list[str] | None = None) -> int:
    """Run the check; always 0 unless the collector itself breaks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between the two scrapes")
    parser.add_argument("--repeat", type=int, default=20, help="back-to-back scrapes timed after those two")
    parser.add_argument("--quiet", action="store_true", help="do not print the exposition")
    parser.add_argument("--fake", type=int, metavar="N", help="use N simulated GPUs instead of NVML")
    args = parser.parse_args(argv)
    nvml: Nvml = fake_nvml(args.fake) if args.fake else pynvml
    collector = build_gpu_collector(nvml)
    try:
        try:
            first_time = timed(collector)[1]
        except SourceError as exc:
            print(f"{exc}; nothing to check on this machine")
            return 0
        time.sleep(args.interval)
        families, second_time = timed(collector)
        times = [first_time, second_time] + [timed(collector)[1] for _ in range(max(0, args.repeat))]
        report(collector, families, times, args.quiet)
    finally:
        collector.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
