"""Spill queue: order, reopening, damaged segments, the disk budget, putting back, locking."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporter.influx.errors import SpillError
from exporter.influx.segments import HEADER
from exporter.influx.spill import SpillQueue


def rec(i: int, size: int = 10) -> tuple[bytes, int]:
    """Record i: a payload naming i, padded to `size` bytes, with i points (at least 1)."""
    return f"r{i:04d}".encode().ljust(size, b"."), max(i, 1)


def drain(queue: SpillQueue) -> list[bytes]:
    """Every record's payload, acknowledging each."""
    out = []
    while (record := queue.peek()) is not None:
        out.append(record.payload)
        assert queue.ack(record.key)
    return out


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))


def test_records_come_back_in_order_across_segments(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20, segment_bytes=100)
    queue.append([rec(i) for i in range(1, 11)])
    assert len(segments(tmp_path)) > 1
    assert queue.points == sum(range(1, 11))
    assert drain(queue) == [rec(i)[0] for i in range(1, 11)]
    assert queue.points == 0
    queue.close()


def test_peek_without_ack_returns_the_same_record(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.append([rec(1), rec(2)])
    first = queue.peek()
    assert first is not None
    queue.release(first.key)
    again = queue.peek()
    assert again == first
    queue.close()


def test_reopen_keeps_unacknowledged_records_and_skips_acknowledged_ones(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20, segment_bytes=45)
    queue.append([rec(i) for i in range(1, 8)])
    for _ in range(3):
        record = queue.peek()
        assert record is not None
        queue.ack(record.key)
    queue.close()
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20, segment_bytes=45)
    assert reopened.points == sum(range(4, 8))
    reopened.append([rec(8)])  # appends after a restart go to a new segment, after the old ones
    assert drain(reopened) == [rec(i)[0] for i in range(4, 9)]
    reopened.close()
    empty = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert empty.points == 0
    empty.close()


def test_a_crash_without_close_loses_nothing_appended(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.append([rec(1), rec(2)])
    # no close(): the flock goes with the process; simulate by closing only the lock
    os.close(queue._lock_fd)
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert drain(reopened) == [rec(1)[0], rec(2)[0]]
    reopened.close()


@pytest.mark.parametrize("cut", [1, HEADER.size - 1, HEADER.size, HEADER.size + 5])
def test_a_truncated_last_segment_is_skipped_and_counted_not_fatal(tmp_path: Path, cut: int) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20, segment_bytes=1 << 20)
    queue.append([rec(1), rec(2), rec(3)])
    queue.close()
    last = segments(tmp_path)[-1]
    size = last.stat().st_size
    record_size = HEADER.size + 10
    os.truncate(last, size - record_size + cut)  # the third record cut `cut` bytes into it
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert reopened.corrupt_records == 1
    header_intact = cut >= HEADER.size
    assert reopened.dropped["corrupt_spill"] == (3 if header_intact else 0)
    assert last.stat().st_size == size - record_size  # cut back to the last good record
    assert drain(reopened) == [rec(1)[0], rec(2)[0]]
    reopened.close()
    again = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert again.corrupt_records == 0  # counted once, not at every start
    again.close()


def test_garbage_after_the_last_record_is_cut_off(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.append([rec(1)])
    queue.close()
    with segments(tmp_path)[-1].open("ab") as f:
        f.write(b"\0" * 40)  # what a crash can leave: a size that grew, blocks never written
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert reopened.corrupt_records == 1
    assert drain(reopened) == [rec(1)[0]]
    reopened.close()


def test_a_payload_that_fails_its_checksum_is_skipped_and_counted(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.append([rec(1), rec(2), rec(3)])
    queue.close()
    seg = segments(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    data[HEADER.size + 10 + HEADER.size + 2] ^= 0xFF  # a byte in record 2's payload
    seg.write_bytes(bytes(data))
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert drain(reopened) == [rec(1)[0], rec(3)[0]]
    assert reopened.corrupt_records == 1
    assert reopened.dropped["corrupt_spill"] == 2
    reopened.close()


def test_past_the_budget_the_oldest_segments_are_dropped_and_counted(tmp_path: Path) -> None:
    record_size = HEADER.size + 10
    queue = SpillQueue(tmp_path, max_bytes=4 * record_size, segment_bytes=2 * record_size)
    queue.append([rec(i) for i in range(1, 5)])  # exactly the budget: two segments of two
    assert queue.dropped["spill_budget"] == 0
    queue.append([rec(5)])  # the oldest segment (records 1 and 2) goes
    assert queue.dropped["spill_budget"] == 1 + 2
    assert queue.bytes <= queue.max_bytes
    assert drain(queue) == [rec(i)[0] for i in (3, 4, 5)]
    queue.close()


def test_a_record_bigger_than_the_budget_is_dropped_and_counted(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=HEADER.size + 5)
    queue.append([rec(7)])
    assert queue.dropped["spill_budget"] == 7
    assert queue.peek() is None
    queue.close()


def test_dropping_the_record_in_flight_counts_it_once(tmp_path: Path) -> None:
    record_size = HEADER.size + 10
    queue = SpillQueue(tmp_path, max_bytes=2 * record_size, segment_bytes=record_size)
    queue.append([rec(1), rec(2)])
    in_flight = queue.peek()
    assert in_flight is not None
    queue.append([rec(3)])  # drops record 1's segment while it is being written
    assert queue.dropped["spill_budget"] == 0  # not yet: the write may still succeed
    queue.release(in_flight.key)  # it failed: now it is lost
    assert queue.dropped["spill_budget"] == 1
    in_flight = queue.peek()
    assert in_flight is not None
    queue.append([rec(4)])
    assert not queue.ack(in_flight.key)  # written although dropped: not counted as dropped
    assert queue.dropped["spill_budget"] == 1
    assert drain(queue) == [rec(3)[0], rec(4)[0]]
    queue.close()


def test_push_front_goes_before_everything_and_survives_a_restart(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.append([rec(2), rec(3)])
    record = queue.peek()
    assert record is not None
    queue.ack(record.key)
    queue.push_front(*rec(1))
    queue.close()
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert drain(reopened) == [rec(1)[0], rec(3)[0]]
    reopened.close()


def test_a_second_queue_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    with pytest.raises(SpillError, match="in use"):
        SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.close()
    SpillQueue(tmp_path, max_bytes=1 << 20).close()


def test_an_unusable_directory_is_a_spill_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SpillError, match="cannot use"):
        SpillQueue(blocker / "spill", max_bytes=1 << 20)
