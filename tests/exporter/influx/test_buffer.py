"""PushBuffer: batching, order across memory and spill, outages, the memory bound, shutdown."""

from __future__ import annotations

from pathlib import Path

from exporter.influx.buffer import Batch, PushBuffer, coalesce
from exporter.influx.lineproto import Chunk
from exporter.influx.replay import ReplayWindow
from exporter.influx.spill import SpillQueue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def chunk(i: int, points: int = 2) -> Chunk:
    """Collection i: `points` lines, each naming i."""
    return Chunk(b"".join(f"m{j} value={i} {i}\n".encode() for j in range(points)), points, i)


def stamps(batch: Batch) -> list[int]:
    """The collection of every line in a batch."""
    return [int(line.rsplit(b" ", 1)[1]) for line in batch.payload.splitlines()]


def take(buffer: PushBuffer) -> Batch:
    batch = buffer.take(flush_interval=1.0, timeout=0)
    assert batch is not None
    return batch


def test_coalesce_joins_chunks_up_to_the_batch_size() -> None:
    records = coalesce([chunk(1), chunk(2), chunk(3), chunk(4, points=5)], batch_size=4)
    assert [points for _, points in records] == [4, 2, 5]


def test_memory_is_sent_when_a_batch_is_full_or_old_enough() -> None:
    clock = Clock()
    buffer = PushBuffer(batch_size=4, max_points=100, clock=clock)
    buffer.put([chunk(1)])
    assert buffer.take(flush_interval=1.0, timeout=0) is None  # 2 points, fresh
    buffer.put([chunk(2), chunk(3)])
    first = take(buffer)
    assert stamps(first) == [1, 1, 2, 2]
    buffer.done(first)
    clock.now += 1.0
    batch = take(buffer)  # chunk 3 is a second old now
    assert stamps(batch) == [3, 3]
    buffer.done(batch)
    buffer.put([chunk(4)])
    buffer.flush()
    assert stamps(take(buffer)) == [4, 4]


def test_one_batch_in_flight_at_a_time() -> None:
    buffer = PushBuffer(batch_size=2, max_points=100)
    buffer.put([chunk(1), chunk(2)])
    first = take(buffer)
    assert buffer.take(flush_interval=0.0, timeout=0) is None
    buffer.done(first)
    assert stamps(take(buffer)) == [2, 2]


def test_a_failed_batch_is_sent_again_first_and_memory_goes_to_disk(tmp_path: Path) -> None:
    spill = SpillQueue(tmp_path, max_bytes=1 << 20)
    buffer = PushBuffer(batch_size=2, max_points=100, spill=spill)
    buffer.put([chunk(1), chunk(2)])
    batch = take(buffer)
    buffer.retry(batch)
    assert buffer.state().down
    assert spill.points == 4  # the failed batch and what was in memory
    buffer.put([chunk(3)])  # while down: straight to disk
    assert buffer.state().memory_points == 0
    sent = []
    while (next_batch := buffer.take(flush_interval=0.0, timeout=0)) is not None:
        sent.extend(stamps(next_batch))
        buffer.done(next_batch)
    assert sent == [1, 1, 2, 2, 3, 3]
    assert not buffer.state().down
    buffer.close()


def test_the_spill_is_drained_before_newer_memory(tmp_path: Path) -> None:
    spill = SpillQueue(tmp_path, max_bytes=1 << 20)
    buffer = PushBuffer(batch_size=2, max_points=4, spill=spill)
    buffer.put([chunk(1), chunk(2), chunk(3)])  # over the bound: memory moves to disk
    assert spill.points == 6
    buffer.put([chunk(4)])
    sent = []
    while (batch := buffer.take(flush_interval=0.0, timeout=0)) is not None:
        sent.extend(stamps(batch))
        buffer.done(batch)
    assert sent == [1, 1, 2, 2, 3, 3, 4, 4]
    buffer.close()


def test_memory_that_overflows_while_a_batch_is_in_flight_stays_behind_it(tmp_path: Path) -> None:
    spill = SpillQueue(tmp_path, max_bytes=1 << 20)
    buffer = PushBuffer(batch_size=2, max_points=4, spill=spill)
    buffer.put([chunk(1)])
    in_flight = buffer.take(flush_interval=0.0, timeout=0)
    assert in_flight is not None
    buffer.put([chunk(2), chunk(3), chunk(4)])  # overflow to disk while chunk 1 is on the wire
    buffer.retry(in_flight)  # ... and its write fails: it must still come first
    sent = []
    while (batch := buffer.take(flush_interval=0.0, timeout=0)) is not None:
        sent.extend(stamps(batch))
        buffer.done(batch)
    assert sent == [1, 1, 2, 2, 3, 3, 4, 4]
    buffer.close()


def test_the_first_failure_puts_the_replay_window_in_front(tmp_path: Path) -> None:
    spill = SpillQueue(tmp_path, max_bytes=1 << 20)
    buffer = PushBuffer(batch_size=2, max_points=100, spill=spill, replay=ReplayWindow(60.0, 100))
    buffer.put([chunk(1), chunk(2), chunk(3)])
    buffer.done(take(buffer))
    buffer.done(take(buffer))
    buffer.retry(take(buffer))  # chunk 3 fails: chunks 1 and 2 may be lost on the server too
    buffer.put([chunk(4)])
    failed_again = take(buffer)
    buffer.retry(failed_again)  # not the first failure: no second replay
    sent = []
    while (batch := buffer.take(flush_interval=0.0, timeout=0)) is not None:
        sent.extend(stamps(batch))
        buffer.done(batch)
    assert sent == [1, 1, 2, 2, 3, 3, 4, 4]
    assert buffer.state().replayed == 4
    buffer.close()


def test_without_a_spill_the_oldest_points_are_dropped_and_counted() -> None:
    buffer = PushBuffer(batch_size=2, max_points=4)
    buffer.put([chunk(1), chunk(2), chunk(3)])
    state = buffer.state()
    assert state.memory_points == 4
    assert state.dropped["buffer_full"] == 2
    assert stamps(take(buffer)) == [2, 2]


def test_without_a_spill_a_failed_batch_goes_back_in_front() -> None:
    buffer = PushBuffer(batch_size=2, max_points=100)
    buffer.put([chunk(1), chunk(2)])
    buffer.retry(take(buffer))
    assert stamps(take(buffer)) == [1, 1]


def test_a_rejected_batch_is_counted_and_gone() -> None:
    buffer = PushBuffer(batch_size=2, max_points=100)
    buffer.put([chunk(1), chunk(2)])
    buffer.reject(take(buffer))
    assert buffer.state().dropped["rejected"] == 2
    assert stamps(take(buffer)) == [2, 2]


def test_close_keeps_memory_and_the_batch_in_flight_on_disk(tmp_path: Path) -> None:
    buffer = PushBuffer(batch_size=2, max_points=100, spill=SpillQueue(tmp_path, max_bytes=1 << 20))
    buffer.put([chunk(1), chunk(2)])
    take(buffer)  # never answered: the sender is stuck
    buffer.close()
    buffer.put([chunk(3)])
    assert buffer.state().dropped["shutdown"] == 2  # after close nothing is accepted
    restarted = PushBuffer(batch_size=2, max_points=100, spill=SpillQueue(tmp_path, max_bytes=1 << 20))
    sent = []
    while (batch := restarted.take(flush_interval=0.0, timeout=0)) is not None:
        sent.extend(stamps(batch))
        restarted.done(batch)
    assert sent == [1, 1, 2, 2]
    restarted.close()


def test_close_without_a_spill_counts_what_is_lost() -> None:
    buffer = PushBuffer(batch_size=2, max_points=100)
    buffer.put([chunk(1), chunk(2)])
    buffer.close()
    assert buffer.state().dropped["shutdown"] == 4


def test_wait_idle_gives_up_when_the_server_is_down() -> None:
    buffer = PushBuffer(batch_size=2, max_points=100)
    buffer.put([chunk(1)])
    buffer.retry(take(buffer))
    assert not buffer.wait_idle(5.0, give_up_when_down=True)
