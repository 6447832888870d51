"""The InfluxDB push against a real VictoriaMetrics (line protocol on /api/v2/write), counted back exactly.

Collections are stamped one second apart starting an hour ago, so the expected samples of every series
are known: the server must hold exactly those, no gaps, no duplicates, whatever happened in between.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.config import ExporterConfig
from exporter.influx.pusher import InfluxPusher
from exporter.influx.settings import PushSettings
from exporter.influx.writer import InfluxWriter, WriteResult
from exporter.wiring import build_node
from foundation.exposition import render
from foundation.registry import Registry
from simulator.backends import victoria_metrics
from simulator.backends.victoria_metrics import VICTORIA_METRICS, Samples, VictoriaMetrics
from simulator.node_exporter import Simulation, simulated_hardware
from tests.exporter.influx.fakes import SyntheticCollector
from tests.helpers import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(VICTORIA_METRICS is None, reason="victoria-metrics is not installed"),
]

MATCH = '{__name__=~"ibpool_test_push_.*"}'


def settings_for(vm: VictoriaMetrics, spill: Path | None, **changes: Any) -> PushSettings:
    values: dict[str, Any] = {
        "batch_size": 50,
        "buffer_points": 500,
        "flush_interval_seconds": 0.05,
        "retry_initial_seconds": 0.05,
        "retry_max_seconds": 0.5,
        "timeout_seconds": 5.0,
        "interval_seconds": 0.1,
    }
    values.update(changes)
    return PushSettings(url=vm.url, spill_directory=spill, **values)


def first_stamp_ns() -> int:
    return (time.time_ns() // 10**9 - 3600) * 10**9


def collect(pusher: InfluxPusher, base_ns: int, indexes: range) -> None:
    for i in indexes:
        pusher.sample_once(base_ns + i * 10**9)


def assert_exact(samples: Samples, source: SyntheticCollector, base_ns: int, count: int) -> None:
    """Every series holds the `count` collections, once each, with the values the collector gave."""
    assert len(samples) == source.series, sorted(samples)
    stamps = [base_ns // 10**6 + i * 1000 for i in range(count)]
    for labels, points in samples.items():
        label = dict(labels)
        assert [t for t, _ in points] == stamps, f"{label}: {len(points)} samples, {count} expected"
        if label["__name__"] == "ibpool_test_push_ratio":
            offset = int(label["port"]) / 10
            assert [v for _, v in points] == [i + offset for i in range(count)], label
        else:
            factor = 1 if label["kind"] == "xid" else 2
            assert [v for _, v in points] == [factor * i for i in range(count)], label


def test_a_server_restart_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    source = SyntheticCollector(ports=4)
    base = first_stamp_ns()
    with victoria_metrics.running() as vm:
        pusher = InfluxPusher(settings_for(vm, tmp_path / "spill"), source.collect)
        pusher.start(sample=False)
        collect(pusher, base, range(30))
        assert pusher.buffer.wait_idle(30.0)
        vm.stop()
        collect(pusher, base, range(30, 70))
        # on disk: the 40 collections, and the 30 acknowledged ones sent again (replay)
        assert wait_for(lambda: pusher.buffer.state().spill_points == 70 * source.series, 30.0)
        assert pusher.buffer.state().down
        vm.start()
        collect(pusher, base, range(70, 100))
        assert pusher.buffer.wait_idle(60.0)
        pusher.close()
        vm.flush()
        assert_exact(vm.samples(MATCH), source, base, 100)
        assert pusher.stats.snapshot().retried > 0
        assert set(pusher.buffer.state().dropped.values()) == {0}
        counted = vm.query('count_over_time(ibpool_test_push_ratio{port="2"}[2h])', at=base / 1e9 + 3600)
        assert [float(r["value"][1]) for r in counted] == [100.0]


def test_a_server_crash_loses_nothing_it_had_acknowledged(tmp_path: Path) -> None:
    source = SyntheticCollector(ports=4)
    base = first_stamp_ns()
    with victoria_metrics.running() as vm:
        pusher = InfluxPusher(settings_for(vm, tmp_path / "spill"), source.collect)
        pusher.start(sample=False)
        collect(pusher, base, range(30))
        assert pusher.buffer.wait_idle(30.0)
        vm.kill()  # SIGKILL: VictoriaMetrics loses the samples it had not flushed yet, acknowledged or not
        collect(pusher, base, range(30, 50))
        assert wait_for(lambda: pusher.buffer.state().down, 30.0)
        vm.start()
        collect(pusher, base, range(50, 70))
        assert pusher.buffer.wait_idle(60.0)
        pusher.close()
        vm.flush()
        assert_exact(vm.samples(MATCH), source, base, 70)
        assert pusher.buffer.state().replayed == 30 * source.series


def test_spill_files_left_by_an_exporter_are_drained_by_the_next_one(tmp_path: Path) -> None:
    source = SyntheticCollector(ports=2)
    base = first_stamp_ns()
    spill = tmp_path / "spill"
    with victoria_metrics.running() as vm:
        vm.stop()
        first = InfluxPusher(settings_for(vm, spill), source.collect)
        first.start(sample=False)
        collect(first, base, range(25))
        first.close(drain_seconds=0.5)
        assert list(spill.glob("*.seg"))
        vm.start()
        second = InfluxPusher(settings_for(vm, spill), source.collect)
        second.start(sample=False)
        collect(second, base, range(25, 40))
        assert second.buffer.wait_idle(60.0)
        second.close()
        vm.flush()
        assert_exact(vm.samples(MATCH), source, base, 40)


class AnswerLost:
    """Writes for real, but reports the first `times` successful writes as timed out (the answer got lost)."""

    def __init__(self, inner: InfluxWriter, times: int) -> None:
        self.inner = inner
        self.times = times

    def write(self, payload: bytes) -> WriteResult:
        result = self.inner.write(payload)
        if result.outcome == "ok" and self.times:
            self.times -= 1
            return WriteResult("retry", None, None, "read timed out (simulated)")
        return result

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("dedup", [True, False], ids=["dedup", "no-dedup"])
def test_a_batch_resent_after_a_lost_answer_shows_once_with_dedup(tmp_path: Path, dedup: bool) -> None:
    source = SyntheticCollector(ports=2)
    base = first_stamp_ns()
    with victoria_metrics.running(dedup=dedup) as vm:
        settings = settings_for(vm, tmp_path / "spill")
        pusher = InfluxPusher(settings, source.collect, AnswerLost(InfluxWriter(vm.url, settings.bucket), 3))
        pusher.start(sample=False)
        collect(pusher, base, range(20))
        assert pusher.buffer.wait_idle(30.0)
        pusher.close()
        assert pusher.stats.snapshot().retried > 0
        vm.flush()
        samples = vm.samples(MATCH)
        if dedup:
            assert_exact(samples, source, base, 20)
        else:  # what -dedup.minScrapeInterval is for: VictoriaMetrics keeps both copies otherwise
            assert sum(len(points) for points in samples.values()) > 20 * source.series


def test_the_simulated_node_is_pushed_at_the_push_interval(tmp_path: Path) -> None:
    node = build_node(ExporterConfig(jobs=False), simulated_hardware(Simulation(gpus=2, ports=2)))
    registry = Registry(node.collectors, node.deadlines)
    stamps: list[int] = []
    try:
        with victoria_metrics.running() as vm:

            def clock() -> int:  # records each collection's stamp
                stamps.append(time.time_ns())
                return stamps[-1]

            settings = settings_for(vm, tmp_path / "spill", batch_size=500)
            pusher = InfluxPusher(settings, registry.collect, clock_ns=clock)
            pusher.start()
            assert wait_for(lambda: len(stamps) >= 15, 30.0)
            pusher.close()
            vm.flush()
            samples = vm.samples('{__name__=~"ibpool_.*"}')
    finally:
        registry.close()
        node.close()
    written = pusher.stats.snapshot().written
    assert sum(len(points) for points in samples.values()) == written
    expected = sorted({t // 10**6 for t in stamps})
    gpu_up = [points for labels, points in samples.items() if dict(labels)["__name__"] == "ibpool_gpu_up"]
    assert len(gpu_up) == 2
    for points in gpu_up:
        assert [t for t, _ in points] == expected  # every collection, once
    assert {"ibpool_gpu_utilization_ratio", "ibpool_infiniband_port_data_transmitted_bytes_total"} <= {
        dict(labels)["__name__"] for labels in samples
    }


@pytest.fixture
def full_disk() -> Iterator[Path]:
    """A 64 KiB tmpfs for the spill (needs root)."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path = Path(tempfile.mkdtemp(prefix="ibpool-spill-full-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], check=False).returncode:
        path.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)
        path.rmdir()


def test_a_full_spill_disk_keeps_points_in_memory_and_leaves_no_empty_segments(full_disk: Path) -> None:
    source = SyntheticCollector(ports=4)
    base = first_stamp_ns()
    with victoria_metrics.running() as vm:
        vm.stop()
        settings = settings_for(vm, full_disk, buffer_points=600, replay_seconds=0.0)
        pusher = InfluxPusher(settings, source.collect)
        pusher.start(sample=False)
        collect(pusher, base, range(400))  # 2400 points while the server is down: far more than 64 KiB
        assert wait_for(lambda: pusher.buffer.state().dropped["buffer_full"] > 0, 30.0)  # memory is full
        state = pusher.buffer.state()
        files = {p.name: p.stat().st_size for p in full_disk.glob("*.seg")}
        assert files and 0 not in files.values() and sum(files.values()) == state.spill_bytes
        assert 0 < state.memory_points <= 600
        assert state.spill_disabled and state.spill_errors >= 1
        metrics = render(pusher.collector.collect())
        assert "ibpool_influx_spill_disabled 1" in metrics
        vm.start()
        assert pusher.buffer.wait_idle(60.0)
        pusher.close()
        vm.flush()
        samples = vm.samples(MATCH)
    written = pusher.stats.snapshot().written
    dropped = pusher.buffer.state().dropped
    assert written + dropped["buffer_full"] == 400 * source.series
    assert {reason for reason, points in dropped.items() if points} == {"buffer_full"}
    assert sum(len(points) for points in samples.values()) == written  # each point once
    assert len({len(points) for points in samples.values()}) == 1  # whole collections kept or dropped
    assert list(full_disk.glob("*.seg")) == []
