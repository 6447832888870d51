"""InfluxPusher with a fake writer: order, outages, ambiguous failures, restarts, self metrics."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from exporter.influx.pusher import InfluxPusher
from exporter.influx.settings import PushSettings
from exporter.influx.writer import WriteResult
from foundation.exposition import render
from tests.exporter.influx.fakes import FakeWriter, SyntheticCollector
from tests.helpers import samples_of, wait_for

BASE_NS = 1_700_000_000 * 10**9
FAST = PushSettings(
    url="http://test:8086",
    batch_size=10,
    buffer_points=40,
    flush_interval_seconds=0.01,
    retry_initial_seconds=0.005,
    retry_max_seconds=0.02,
    drain_seconds=2.0,
    replay_seconds=0.0,  # the fake server never loses what it acknowledged; replay has its own test
)


def make(
    tmp_path: Path | None, writer: FakeWriter, source: SyntheticCollector, **changes: Any
) -> InfluxPusher:
    settings = dataclasses.replace(FAST, spill_directory=tmp_path, **changes)
    pusher = InfluxPusher(settings, source.collect, writer)
    pusher.start(sample=False)
    return pusher


def stamp(i: int) -> int:
    return BASE_NS + i * 10**9


def expected_stamps(lines: list[bytes]) -> list[int]:
    return [int(line.rsplit(b" ", 1)[1]) for line in lines]


def test_every_point_arrives_once_in_collection_order(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    pusher = make(tmp_path, writer, source)
    for i in range(20):
        pusher.sample_once(stamp(i))
    assert pusher.buffer.wait_idle(10.0)
    pusher.close()
    assert len(writer.lines) == 20 * source.series
    assert max(writer.counts().values()) == 1
    stamps = expected_stamps(writer.lines)
    assert stamps == sorted(stamps)
    assert pusher.stats.snapshot().written == 20 * source.series


def test_an_outage_spills_and_drains_in_order_without_loss(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    pusher = make(tmp_path, writer, source)
    for i in range(5):
        pusher.sample_once(stamp(i))
    assert pusher.buffer.wait_idle(10.0)
    writer.down = True
    for i in range(5, 30):
        pusher.sample_once(stamp(i))
    assert wait_for(lambda: pusher.buffer.state().spill_points == 25 * source.series, 10.0)
    assert pusher.buffer.state().memory_points == 0
    writer.down = False
    assert pusher.buffer.wait_idle(10.0)
    pusher.close()
    assert len(writer.lines) == 30 * source.series
    assert max(writer.counts().values()) == 1
    stamps = expected_stamps(writer.lines)
    assert stamps == sorted(stamps)
    assert pusher.stats.snapshot().retried > 0


def test_a_batch_retried_after_an_ambiguous_failure_resends_identical_points(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    writer.ambiguous = 2  # the server stored the batch, the answer got lost, twice
    pusher = make(tmp_path, writer, source)
    for i in range(6):
        pusher.sample_once(stamp(i))
    assert pusher.buffer.wait_idle(10.0)
    pusher.close()
    counts = writer.counts()
    assert len(counts) == 6 * source.series  # every distinct point, and no other
    assert sum(counts.values()) > len(counts)  # some arrived twice: byte-identical, same timestamp


def test_after_an_outage_what_was_just_acknowledged_is_sent_again(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    pusher = make(tmp_path, writer, source, replay_seconds=60.0)
    for i in range(3):
        pusher.sample_once(stamp(i))
    assert pusher.buffer.wait_idle(10.0)
    writer.down = True
    pusher.sample_once(stamp(3))
    assert wait_for(lambda: pusher.buffer.state().down, 10.0)
    writer.down = False
    assert pusher.buffer.wait_idle(10.0)
    pusher.close()
    counts = writer.counts()
    assert len(counts) == 4 * source.series
    assert {line: n for line, n in counts.items() if n != 1} == {
        line: 2 for line in counts if expected_stamps([line])[0] < stamp(3)
    }  # the three acknowledged collections once more, identical; nothing else
    stamps = expected_stamps(writer.lines)
    assert stamps[3 * source.series :] == sorted(stamps[3 * source.series :])  # the replay comes first
    assert pusher.buffer.state().replayed == 3 * source.series


def test_a_restart_drains_what_the_previous_run_spilled(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    writer.down = True
    first = make(tmp_path, writer, source)
    for i in range(10):
        first.sample_once(stamp(i))
    first.close(drain_seconds=0.5)
    assert list(tmp_path.glob("*.seg"))
    writer.down = False
    second = make(tmp_path, writer, source)
    for i in range(10, 12):
        second.sample_once(stamp(i))
    assert second.buffer.wait_idle(10.0)
    second.close()
    stamps = expected_stamps(writer.lines)
    assert len(stamps) == 12 * source.series
    assert stamps == sorted(stamps)
    assert max(writer.counts().values()) == 1


def test_close_sends_what_memory_holds_when_the_server_is_up(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    pusher = make(
        tmp_path, writer, source, flush_interval_seconds=3600.0, batch_size=1000, buffer_points=5000
    )
    pusher.sample_once(stamp(0))
    pusher.close()
    assert len(writer.lines) == source.series
    assert not list(tmp_path.glob("*.seg"))


def test_refused_batches_are_dropped_and_counted(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    writer.outcomes = [WriteResult("reject", 400, None, "bad line")]
    pusher = make(tmp_path, writer, source, batch_size=source.series)
    pusher.sample_once(stamp(0))
    pusher.sample_once(stamp(1))
    assert pusher.buffer.wait_idle(10.0)
    pusher.close()
    assert pusher.buffer.state().dropped["rejected"] == source.series
    assert expected_stamps(writer.lines) == [stamp(1)] * source.series


def test_without_a_spill_directory_the_memory_bound_holds(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    writer.down = True
    pusher = make(None, writer, source)
    for i in range(20):
        pusher.sample_once(stamp(i))
    state = pusher.buffer.state()
    assert state.memory_points <= FAST.buffer_points + FAST.batch_size
    assert state.dropped["buffer_full"] > 0
    pusher.close(drain_seconds=0.1)


def test_the_sampler_thread_stamps_each_collection_once(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    settings = dataclasses.replace(FAST, spill_directory=tmp_path, interval_seconds=0.02)
    pusher = InfluxPusher(settings, source.collect, writer)
    pusher.start()
    assert wait_for(lambda: source.calls >= 5, 10.0)
    pusher.close()
    stamps = expected_stamps(writer.lines)
    assert len(stamps) == source.calls * source.series
    assert len(set(stamps)) == source.calls  # one timestamp per collection, all distinct


def test_self_metrics_describe_the_push(tmp_path: Path) -> None:
    writer, source = FakeWriter(), SyntheticCollector()
    pusher = make(tmp_path, writer, source)
    text = render(pusher.collector.collect())
    assert samples_of(text, "ibpool_influx_points_written_total") == {(): 0}
    assert "ibpool_influx_last_write_timestamp_seconds" not in text  # omitted until a write succeeds
    pusher.sample_once(stamp(0))
    assert pusher.buffer.wait_idle(10.0)
    writer.down = True
    pusher.sample_once(stamp(1))
    assert wait_for(lambda: pusher.buffer.state().spill_points > 0, 10.0)
    text = render(pusher.collector.collect())
    assert samples_of(text, "ibpool_influx_points_written_total") == {(): source.series}
    assert samples_of(text, "ibpool_influx_spill_points") == {(): source.series}
    assert samples_of(text, "ibpool_influx_spill_bytes")[()] > 0
    assert samples_of(text, "ibpool_influx_buffer_points") == {(): 0}
    assert samples_of(text, "ibpool_influx_points_retried_total")[()] >= source.series
    dropped = samples_of(text, "ibpool_influx_points_dropped_total")
    assert {dict(k)["reason"] for k in dropped} >= {"spill_budget", "corrupt_spill", "rejected", "not_finite"}
    assert set(dropped.values()) == {0}
    assert samples_of(text, "ibpool_influx_last_write_timestamp_seconds")[()] > 1e9
    pusher.close(drain_seconds=0.1)
