"""Spill queue: a FIFO of records in fsync'd segment files in one directory, within a disk budget.

- append is all or nothing: a failed write or fsync (a full disk) leaves no file and no record behind;
- past `max_bytes` whole segments are deleted oldest first, their points counted (`spill_budget`);
- a record cut off by a crash is truncated away at open, a payload failing its CRC is skipped: counted
  (`corrupt_spill`), never fatal; a lost cursor update only sends a record again (same timestamp).
One exporter per directory (`lock`, flock'd). Not thread-safe: `PushBuffer` calls it under its lock.
The files and the crash handling: docs/long-term-store.md, "The spill directory".
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exporter.influx.errors import SpillError
from exporter.influx.segments import (
    HEADER,
    RecordRef,
    encode_record,
    read_payload,
    scan,
    segment_name,
    segment_seq,
)

log = logging.getLogger(__name__)

BASE_SEQ = 1 << 40  # first segment of an empty directory; leaves room for records put back at the front
DROP_REASONS = ("spill_budget", "corrupt_spill")


@dataclass(frozen=True)
class SpillKey:
    """Identifies one record: its segment and offset."""

    seq: int
    offset: int


@dataclass(frozen=True)
class SpillRecord:
    """The head record, as `peek` returns it."""

    key: SpillKey
    payload: bytes
    points: int


@dataclass(frozen=True)
class _Mark:
    """The queue's tail before an append, so that a failed append can be undone."""

    next_seq: int
    tail_seq: int | None
    tail_size: int
    tail_records: int


@dataclass
class _Segment:
    seq: int
    path: Path
    records: deque[RecordRef]
    size: int
    fd: int | None = field(default=None)  # for reading


class SpillQueue:
    """Records (line-protocol payload, points) on disk, oldest first."""

    def __init__(self, directory: Path, max_bytes: int, segment_bytes: int = 8 << 20) -> None:
        if max_bytes <= 0 or segment_bytes <= 0:
            raise ValueError("max_bytes and segment_bytes must be > 0")
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.corrupt_records = 0
        self.points = 0
        self.bytes = 0
        self._segments: deque[_Segment] = deque()
        self._tail_fd: int | None = None  # open for appends to self._segments[-1]
        self._next_seq = BASE_SEQ
        self._pinned: SpillKey | None = None  # the record `peek` handed out
        self._pinned_points = 0
        self._pinned_dropped = False
        self._cursor_text = ""
        self._lock_fd = self._lock_directory()
        self._load()

    @property
    def records(self) -> int:
        """Records not yet acknowledged."""
        return sum(len(s.records) for s in self._segments)

    # --- opening -------------------------------------------------------------------------------------

    def _lock_directory(self) -> int:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise SpillError(f"cannot use spill directory {self.directory}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise SpillError(f"spill directory {self.directory} is in use by another process") from None
        return fd

    def _load(self) -> None:
        cursor = self._read_cursor()
        found = sorted((seq, p) for p in self.directory.iterdir() if (seq := segment_seq(p)) is not None)
        for seq, path in found:
            self._next_seq = max(self._next_seq, seq + 1)
            try:
                result = scan(path)
                if result.damaged:
                    self.corrupt_records += 1
                    self.dropped["corrupt_spill"] += result.lost_points
                    log.warning(
                        "spill segment %s damaged at byte %d of %d (%d points lost); the rest is kept",
                        path.name,
                        result.good_size,
                        result.file_size,
                        result.lost_points,
                    )
                    self._truncate(path, result.good_size)
            except OSError as exc:
                log.error("cannot read spill segment %s, left alone: %s", path, exc.strerror or exc)
                continue
            skip = cursor.get(seq, 0)
            records = deque(r for r in result.records if r.offset >= skip)
            if not records:
                path.unlink(missing_ok=True)
                continue
            self._segments.append(_Segment(seq, path, records, result.good_size))
            self.points += sum(r.points for r in records)
            self.bytes += result.good_size
        self._save_cursor(sync=True)
        if self.points:
            log.info(
                "spill: %d points in %d segments left by a previous run", self.points, len(self._segments)
            )

    @staticmethod
    def _truncate(path: Path, size: int) -> None:
        try:
            os.truncate(path, size)
        except OSError as exc:
            log.warning("cannot truncate damaged spill segment %s: %s", path.name, exc.strerror or exc)

    def _read_cursor(self) -> dict[int, int]:
        try:
            lines = (self.directory / "cursor").read_text().splitlines()
            return {int(seq): int(offset) for seq, offset in (line.split() for line in lines)}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("spill cursor unreadable (%s): records may be sent twice", exc)
            return {}

    # --- writing -------------------------------------------------------------------------------------

    def append(self, records: Sequence[tuple[bytes, int]]) -> None:
        """Add records at the tail and fsync them; drops the oldest segments to stay within the budget.

        All or nothing: on an OSError what this call wrote is undone before it is raised."""
        mark = self._mark()
        try:
            wrote = False
            for payload, points in records:
                blob = encode_record(payload, points)
                if not self._make_room(len(blob)):
                    self.dropped["spill_budget"] += points
                    continue
                fd = self._tail(len(blob))
                self._write(self._segments[-1], fd, blob, points)
                wrote = True
            if wrote and self._tail_fd is not None:
                os.fsync(self._tail_fd)
        except OSError:
            self._undo(mark)
            raise

    def _mark(self) -> _Mark:
        tail = self._segments[-1] if self._tail_fd is not None and self._segments else None
        if tail is None:
            return _Mark(self._next_seq, None, 0, 0)
        return _Mark(self._next_seq, tail.seq, tail.size, len(tail.records))

    def _undo(self, mark: _Mark) -> None:
        """Remove what was appended since `mark`: new segments go, the old tail is cut back and closed."""
        self._close_tail()
        for seg in [s for s in self._segments if s.seq >= mark.next_seq]:
            self._segments.remove(seg)
            self._forget(seg)
        for seg in self._segments:
            if seg.seq == mark.tail_seq:  # cut back even when nothing was counted: a write may be partial
                while len(seg.records) > mark.tail_records:
                    self.points -= seg.records.pop().points
                self.bytes -= seg.size - mark.tail_size
                seg.size = mark.tail_size
                try:
                    os.truncate(seg.path, seg.size)
                except OSError as exc:  # the bytes past seg.size are ignored until the segment is read
                    log.warning("cannot cut back spill segment %s: %s", seg.path.name, exc.strerror or exc)
        self._save_cursor()

    def push_front(self, payload: bytes, points: int) -> None:
        """Put one record back in front of everything (a batch whose write failed); fsync'd."""
        blob = encode_record(payload, points)
        if self.bytes + len(blob) > self.max_bytes:  # it is the oldest record: it goes first
            self.dropped["spill_budget"] += points
            return
        if self._segments:
            seq = self._segments[0].seq - 1
        else:
            seq, self._next_seq = self._next_seq, self._next_seq + 1
        path = self.directory / segment_name(seq)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if os.write(fd, blob) != len(blob):
                raise OSError(errno.ENOSPC, f"short write to spill segment {path.name}")
            os.fsync(fd)
        except OSError:
            path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        try:
            self._fsync_directory()
        except OSError:
            path.unlink(missing_ok=True)
            raise
        self._segments.appendleft(_Segment(seq, path, deque([RecordRef(0, len(payload), points)]), len(blob)))
        self.points += points
        self.bytes += len(blob)
        self._save_cursor()

    def _make_room(self, size: int) -> bool:
        if size > self.max_bytes:
            return False
        while self._segments and self.bytes + size > self.max_bytes:
            self._drop_head()
        return True

    def _tail(self, size: int) -> int:
        if self._tail_fd is not None:
            current = self._segments[-1].size
            if current == 0 or current + size <= self.segment_bytes:
                return self._tail_fd
            os.fsync(self._tail_fd)
            self._close_tail()
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        path = self.directory / segment_name(seq)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._segments.append(_Segment(seq, path, deque(), 0))
        self._tail_fd = fd  # from here on, a failure is undone with the segment
        self._fsync_directory()
        return fd

    def _write(self, seg: _Segment, fd: int, blob: bytes, points: int) -> None:
        written = os.pwrite(fd, blob, seg.size)
        if written != len(blob):  # a full disk may take part of a record; `_undo` cuts it off
            raise OSError(errno.ENOSPC, f"short write to spill segment {seg.path.name}")
        seg.records.append(RecordRef(seg.size, len(blob) - HEADER.size, points))
        seg.size += len(blob)
        self.bytes += len(blob)
        self.points += points

    # --- reading -------------------------------------------------------------------------------------

    def peek(self) -> SpillRecord | None:
        """The oldest record (it stays queued until `ack`); damaged records are skipped and counted."""
        while self._segments:
            seg = self._segments[0]
            if not seg.records:
                if self._is_tail(seg):
                    return None
                self._remove_head()
                continue
            ref = seg.records[0]
            try:
                if seg.fd is None:
                    seg.fd = os.open(seg.path, os.O_RDONLY)
                payload = read_payload(seg.fd, ref)
            except OSError as exc:
                log.error("cannot read spill segment %s: %s", seg.path.name, exc.strerror or exc)
                payload = None
            if payload is None:
                log.warning(
                    "spill record at %s:%d damaged; %d points lost", seg.path.name, ref.offset, ref.points
                )
                self.corrupt_records += 1
                self.dropped["corrupt_spill"] += ref.points
                self._consume_head()
                continue
            key = SpillKey(seg.seq, ref.offset)
            self._pinned, self._pinned_points, self._pinned_dropped = key, ref.points, False
            return SpillRecord(key, payload, ref.points)
        return None

    def ack(self, key: SpillKey) -> bool:
        """The server has record `key`: remove it. False when the budget had already dropped it."""
        dropped = self._pinned_dropped or self._pinned != key
        self._pinned = None
        if dropped or not self._segments:
            return False
        head = self._segments[0]
        if head.seq != key.seq or not head.records or head.records[0].offset != key.offset:
            return False
        self._consume_head()
        return True

    def release(self, key: SpillKey) -> None:
        """The write of record `key` failed: it stays queued (or is counted now if the budget dropped it)."""
        if self._pinned == key and self._pinned_dropped:
            self.dropped["spill_budget"] += self._pinned_points
        self._pinned = None

    # --- removing ------------------------------------------------------------------------------------

    def _consume_head(self) -> None:
        seg = self._segments[0]
        ref = seg.records.popleft()
        self.points -= ref.points
        if not seg.records and not self._is_tail(seg):
            self._remove_head()
        else:
            self._save_cursor()

    def _drop_head(self) -> None:
        seg = self._segments[0]
        lost = 0
        for ref in seg.records:
            if self._pinned == SpillKey(seg.seq, ref.offset):
                self._pinned_dropped = True
            else:
                lost += ref.points
        self.dropped["spill_budget"] += lost
        log.warning("spill over its budget of %d bytes: dropped %d oldest points", self.max_bytes, lost)
        self._remove_head()

    def _remove_head(self) -> None:
        seg = self._segments.popleft()
        if self._tail_fd is not None and not self._segments:
            self._close_tail()
        self._forget(seg)
        self._save_cursor()

    def _forget(self, seg: _Segment) -> None:
        """Delete a segment taken out of the queue, with its points and bytes."""
        self.points -= sum(r.points for r in seg.records)
        self.bytes -= seg.size
        if seg.fd is not None:
            os.close(seg.fd)
            seg.fd = None
        try:
            seg.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot delete spill segment %s: %s", seg.path.name, exc.strerror or exc)

    # --- bookkeeping ---------------------------------------------------------------------------------

    def _is_tail(self, seg: _Segment) -> bool:
        return self._tail_fd is not None and seg is self._segments[-1]

    def _close_tail(self) -> None:
        if self._tail_fd is not None:
            os.close(self._tail_fd)
            self._tail_fd = None

    def _save_cursor(self, sync: bool = False) -> None:
        path = self.directory / "cursor"
        text = ""
        for seg in self._segments:
            offset = seg.records[0].offset if seg.records else seg.size
            if offset:
                text += f"{seg.seq} {offset}\n"
        if text == self._cursor_text and not sync:
            return
        try:
            if not text:
                path.unlink(missing_ok=True)
            else:
                tmp = self.directory / "cursor.tmp"
                with tmp.open("w") as f:
                    f.write(text)
                    if sync:
                        f.flush()
                        os.fsync(f.fileno())
                os.replace(tmp, path)
            self._cursor_text = text
        except OSError as exc:
            log.warning("cannot save the spill cursor (%s): records may be sent twice", exc.strerror or exc)

    def _fsync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Sync and close every file, save the cursor and release the directory."""
        if self._tail_fd is not None:
            os.fsync(self._tail_fd)
            self._close_tail()
        for seg in self._segments:
            if seg.fd is not None:
                os.close(seg.fd)
                seg.fd = None
        self._save_cursor(sync=True)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
