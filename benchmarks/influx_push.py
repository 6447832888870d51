"""InfluxDB push throughput: points per second from one exporter process to a local VictoriaMetrics.

Three figures for the same synthetic collections (`--series` series each, stamped one second apart):

1. encoding only: the pusher's cached-prefix encoder against influxdb-client's `Point.to_line_protocol`;
2. end to end with the pusher (encoder, buffer, batches, influxdb-client's synchronous write) until the
   server has acknowledged every point; the collections are offered as fast as the queue takes them;
3. end to end with `Point` serialisation instead, written in the same batches through the same client;
4. an outage: collections offered while the server is stopped (each one fsync'd into the spill), then
   the drain from disk once it is back (the replayed points included).

Each prints points/s, the batch size and CPU seconds (this process, and VictoriaMetrics') per million
points; the pusher's figure is checked against the sample count VictoriaMetrics reports back.

    .venv/bin/python -m benchmarks.influx_push [--series 10000] [--collections 100] [--batch-size 5000]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from influxdb_client.client.write.point import Point

from exporter.influx.lineproto import LineEncoder, parse_labels
from exporter.influx.pusher import InfluxPusher
from exporter.influx.settings import PushSettings
from exporter.influx.writer import InfluxWriter
from foundation.exposition import MetricFamily, MetricSpec
from simulator.backends import victoria_metrics

SPECS = (
    MetricSpec("ibpool_bench_hw_counter_total", "counter", "Bench.", ("device", "port", "counter")),
    MetricSpec("ibpool_bench_ratio", "gauge", "Bench.", ("gpu", "uuid")),
)


def families(series: int, n: int) -> list[MetricFamily]:
    """Collection `n`: `series` samples, mostly counters (as an IB-heavy node), some float gauges."""
    counters, ratios = MetricFamily(SPECS[0]), MetricFamily(SPECS[1])
    for i in range(series):
        if i % 4:
            counters.add((f"mlx5_{i // 64}", str(i % 2 + 1), f"counter_{i % 64}"), n * 1000 + i)
        else:
            ratios.add((str(i), f"GPU-{i:08x}-bench"), (n + i) % 100 / 100.0)
    return [counters, ratios]


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of this process, or of `pid` (from /proc)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Figure:
    """One measured run."""

    name: str
    points: int
    wall: float
    cpu: float
    server_cpu: float | None = None

    def line(self, batch_size: int | None) -> str:
        per_m = 1e6 / self.points
        server = "" if self.server_cpu is None else f", server {self.server_cpu * per_m:.2f}"
        batch = "" if batch_size is None else f"  batch {batch_size}"
        return (
            f"{self.name:<34} {self.points / self.wall:>12,.0f} points/s{batch}  CPU s per 1M points: "
            f"exporter {self.cpu * per_m:.2f}{server}  ({self.points:,} in {self.wall:.2f} s)"
        )


def measure(name: str, run: Callable[[], int], server_pid: int | None = None) -> Figure:
    """Time `run` (which returns the points it handled) with wall clock and CPU."""
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    server0 = cpu_seconds(server_pid) if server_pid else 0.0
    points = run()
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    server = cpu_seconds(server_pid) - server0 if server_pid else None
    return Figure(name, points, wall, cpu, server)


def point_lines(collection: list[MetricFamily], stamp: int) -> list[str]:
    """influxdb-client's serialisation of a collection, one `Point` per sample."""
    make: Any = Point  # unannotated in influxdb-client
    lines = []
    for family in collection:
        for rendered, value in family.samples:
            point = make(family.spec.name).field("value", float(value)).time(stamp)
            for key, tag in parse_labels(family.spec.labels, rendered):
                point = point.tag(key, tag)
            lines.append(point.to_line_protocol())
    return lines


def main(argv: list[str]) -> int:
    """Run the three measurements and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--collections", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("exporter.influx").setLevel(logging.ERROR)  # the outage's retries are expected
    if victoria_metrics.VICTORIA_METRICS is None:
        print("victoria-metrics is not installed", file=sys.stderr)
        return 1
    base = (time.time_ns() // 10**9 - 7200) * 10**9
    collections = [families(args.series, n) for n in range(args.collections)]
    stamps = [base + n * 10**9 for n in range(args.collections)]
    encode_n = min(10, args.collections)
    encoder = LineEncoder(args.batch_size)
    encoder.encode(collections[0], stamps[0])  # fill the prefix cache, as the first collection does
    figures = [
        measure(
            "encode: pusher LineEncoder",
            lambda: sum(
                sum(c.points for c in encoder.encode(collections[i], stamps[i])[0]) for i in range(encode_n)
            ),
        ),
        measure(
            "encode: influxdb-client Point",
            lambda: sum(len(point_lines(collections[i], stamps[i])) for i in range(min(3, encode_n))),
        ),
    ]
    with victoria_metrics.running() as vm:
        assert vm.process is not None
        pid = vm.process.pid
        settings = PushSettings(
            url=vm.url,
            batch_size=args.batch_size,
            buffer_points=8 * args.batch_size + args.series,
            flush_interval_seconds=0.05,
            gzip=args.gzip,
        )
        figures.append(measure("end to end: pusher", lambda: push_all(settings, collections, stamps), pid))
        vm.flush()
        stored = sum(len(p) for p in vm.samples('{__name__=~"ibpool_bench_.*"}').values())
        figures.append(
            measure(
                "end to end: Point + same writer",
                lambda: write_points(settings, collections[:10], stamps[:10], base_shift=3600 * 10**9),
                pid,
            )
        )
        figures.extend(outage(vm, settings, collections[:20], [t + 1800 * 10**9 for t in stamps[:20]]))
    print(f"series per collection {args.series:,}, collections {args.collections}, gzip {args.gzip}")
    for figure in figures:
        print(figure.line(args.batch_size if figure.name.startswith("end") else None))
    expected = args.series * args.collections
    print(f"VictoriaMetrics holds {stored:,} of the pusher's {expected:,} points")
    return 0 if stored == expected else 1


def push_all(settings: PushSettings, collections: list[list[MetricFamily]], stamps: list[int]) -> int:
    """Offer every collection to a pusher (waiting while memory is full); return once all are written."""
    pusher = InfluxPusher(settings, list)
    pusher.start(sample=False)
    limit = settings.buffer_points - len(collections[0][0].samples) - len(collections[0][1].samples)
    points = 0
    for collection, stamp in zip(collections, stamps, strict=True):
        while pusher.buffer.state().memory_points > limit:
            time.sleep(0.001)
        points += pusher.offer(collection, stamp)
    if not pusher.buffer.wait_idle(300.0):
        raise RuntimeError("the pusher did not drain")
    pusher.close()
    if pusher.stats.snapshot().written != points:
        raise RuntimeError("not every point was acknowledged")
    return points


def outage(
    vm: victoria_metrics.VictoriaMetrics,
    settings: PushSettings,
    collections: list[list[MetricFamily]],
    stamps: list[int],
) -> list[Figure]:
    """Spill while the server is down, then drain once it is back: two figures."""
    with tempfile.TemporaryDirectory(prefix="ibpool-bench-spill-") as spill:
        fast_retry = dataclasses.replace(
            settings, spill_directory=Path(spill), retry_initial_seconds=0.02, retry_max_seconds=0.1
        )
        pusher = InfluxPusher(fast_retry, list)
        pusher.start(sample=False)
        vm.stop()
        pusher.offer(collections[0], stamps[0] - 10**9)  # the first failure marks the server down
        while not pusher.buffer.state().down:
            time.sleep(0.001)
        offered = measure("outage: spill to disk", lambda: offer_all(pusher, collections, stamps))
        vm.start()
        assert vm.process is not None
        drained = measure("outage: drain from disk", lambda: drain(pusher, offered.points), vm.process.pid)
        pusher.close()
    return [offered, drained]


def offer_all(pusher: InfluxPusher, collections: list[list[MetricFamily]], stamps: list[int]) -> int:
    """Offer every collection; the points offered."""
    return sum(pusher.offer(c, t) for c, t in zip(collections, stamps, strict=True))


def drain(pusher: InfluxPusher, points: int) -> int:
    """Wait until the spill is empty; the points it held (what was offered, and the replay)."""
    if not pusher.buffer.wait_idle(300.0):
        raise RuntimeError("the spill did not drain")
    return points + pusher.buffer.state().replayed


def write_points(
    settings: PushSettings, collections: list[list[MetricFamily]], stamps: list[int], base_shift: int
) -> int:
    """Serialise with `Point` and write in batches of `batch_size` lines."""
    writer = InfluxWriter(settings.url, settings.bucket, gzip=settings.gzip)
    points = 0
    for collection, stamp in zip(collections, stamps, strict=True):
        lines = point_lines(collection, stamp + base_shift)
        for i in range(0, len(lines), settings.batch_size):
            batch = lines[i : i + settings.batch_size]
            if writer.write("\n".join(batch).encode()).outcome != "ok":
                raise RuntimeError("write failed")
            points += len(batch)
    writer.close()
    return points


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
