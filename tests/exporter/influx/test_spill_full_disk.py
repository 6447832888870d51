"""A full disk under the spill: a failed attempt leaves no file behind, the buffer keeps to memory only
(with a metric) and tries the disk again later.

The first tests inject the error at the write call; the others fill a real, tiny tmpfs (root only).
tests/integration/test_influx_push.py runs the pusher against VictoriaMetrics on a full tmpfs.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.influx import spill as spill_module
from exporter.influx.buffer import PushBuffer
from exporter.influx.lineproto import Chunk
from exporter.influx.metrics import PushStats, push_families
from exporter.influx.spill import SpillQueue
from foundation.exposition import render
from tests.exporter.influx.test_buffer import Clock, chunk, stamps, take
from tests.exporter.influx.test_spill import drain, rec, segments
from tests.helpers import mounted_tmpfs


class FullDisk:
    """The `os` module as the spill sees it, with a disk that fills after `writes` writes: then every
    write (and, with `fsync`, every fsync) fails with ENOSPC, or with `short` takes half its bytes."""

    def __init__(self, writes: int, short: bool = False, fsync: bool = False) -> None:
        self.writes = writes
        self.short = short
        self.fsync_fails = fsync

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _full(self) -> bool:
        self.writes -= 1
        return self.writes < 0

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if not self._full():
            return os.pwrite(fd, data, offset)
        if self.short:
            return os.pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, fd: int, data: bytes) -> int:
        if not self._full():
            return os.write(fd, data)
        if self.short:
            return os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fsync(self, fd: int) -> None:
        if self.fsync_fails:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)


def fill(monkeypatch: pytest.MonkeyPatch, disk: FullDisk) -> None:
    monkeypatch.setattr(spill_module, "os", disk)


def on_disk(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in segments(directory)}


@pytest.mark.parametrize("short", [False, True], ids=["enospc", "short-write"])
def test_a_failed_append_is_undone_completely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short: bool
) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20, segment_bytes=60)
    queue.append([rec(i) for i in range(1, 4)])
    before = (on_disk(tmp_path), queue.points, queue.bytes, queue.records)
    fill(monkeypatch, FullDisk(3, short))
    for _ in range(27):  # the probe saw one empty segment per attempt
        with pytest.raises(OSError):
            queue.append([rec(i) for i in range(10, 18)])  # spans new segments before it fails
    assert (on_disk(tmp_path), queue.points, queue.bytes, queue.records) == before
    monkeypatch.undo()
    queue.append([rec(20)])
    assert drain(queue) == [rec(i)[0] for i in (1, 2, 3, 20)]
    queue.close()
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20, segment_bytes=60)
    assert reopened.points == 0 and reopened.corrupt_records == 0
    reopened.close()


def test_a_failed_fsync_is_undone_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = SpillQueue(tmp_path, max_bytes=1 << 20)
    queue.append([rec(1)])
    before = (on_disk(tmp_path), queue.points)
    fill(monkeypatch, FullDisk(100, fsync=True))
    with pytest.raises(OSError):
        queue.append([rec(2), rec(3)])
    monkeypatch.undo()
    assert (on_disk(tmp_path), queue.points) == before
    queue.close()
    reopened = SpillQueue(tmp_path, max_bytes=1 << 20)
    assert drain(reopened) == [rec(1)[0]]
    reopened.close()


def test_the_buffer_keeps_to_memory_and_tries_the_disk_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    spill = SpillQueue(tmp_path, max_bytes=1 << 20)
    buffer = PushBuffer(4, 6, spill, clock, spill_retry_seconds=10.0, spill_retry_max_seconds=40.0)
    batch = take_when_due(buffer, [chunk(0), chunk(1)])
    fill(monkeypatch, FullDisk(0))
    buffer.retry(batch)  # the server is down; the disk is full
    assert buffer.state().spill_disabled and buffer.spill_errors == 1
    for i in range(2, 8):
        buffer.put([chunk(i)])  # memory only, no new attempt: the oldest beyond 6 points are dropped
    state = buffer.state()
    assert (state.memory_points, state.dropped["buffer_full"], buffer.spill_errors) == (6, 10, 1)
    assert segments(tmp_path) == []
    clock.now += 10.0  # the next try fails again: the wait doubles
    buffer.put([chunk(8)])
    assert buffer.spill_errors == 2 and buffer.state().spill_disabled
    clock.now += 19.0
    assert buffer.state().spill_disabled
    clock.now += 1.0
    monkeypatch.undo()  # space again
    assert not buffer.state().spill_disabled
    buffer.put([chunk(9)])
    state = buffer.state()
    assert not state.spill_disabled and state.memory_points == 0 and state.spill_points == 8
    sent: list[int] = []
    while (buffer.state().spill_points or buffer.state().memory_points) and len(sent) < 20:
        batch = take(buffer)
        sent += stamps(batch)
        buffer.done(batch)
    assert sent == [i for i in (6, 7, 8, 9) for _ in range(2)]  # oldest dropped, the rest in order
    families = render(push_families(PushStats().snapshot(), buffer.state()))
    assert "ibpool_influx_spill_disabled 0" in families and "ibpool_influx_spill_errors_total 2" in families


def take_when_due(buffer: PushBuffer, chunks: list[Chunk]) -> Any:
    buffer.put(chunks)
    buffer.flush()
    return take(buffer)


@pytest.fixture
def tiny_disk() -> Iterator[Path]:
    """A 64 KiB tmpfs (needs root)."""
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with mounted_tmpfs("64k", "ibpool-full-") as path:
        yield path


def test_a_real_full_disk_leaves_only_the_segments_the_queue_holds(tiny_disk: Path) -> None:
    queue = SpillQueue(tiny_disk, max_bytes=1 << 30, segment_bytes=8192)
    failures = 0
    for i in range(200):
        try:
            queue.append([rec(i, 3000)])
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            failures += 1
    assert failures >= 27
    held = {seg.path.name: seg.size for seg in queue._segments}
    assert on_disk(tiny_disk) == held and 0 not in held.values()
    points = queue.points
    queue.close()
    reopened = SpillQueue(tiny_disk, max_bytes=1 << 30, segment_bytes=8192)
    assert reopened.points == points and reopened.corrupt_records == 0
    payloads = drain(reopened)
    assert payloads == sorted(payloads) and len(payloads) == len(set(payloads))
    reopened.close()
