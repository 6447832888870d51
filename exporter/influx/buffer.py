"""The pusher's queue: a bounded memory tier behind the spill queue, one batch in flight at a time.

Points reach the server in the order they were collected: spilled records are older than memory's chunks
and are sent first. Past `max_points`, and while the server is down, memory moves to the spill (without
one the oldest chunks are dropped: `buffer_full`). A failed batch goes back in front (on the first
failure after a success, behind the batches acknowledged in the replay window). A failed spill write leaves
nothing behind; the buffer then keeps to memory (`spill_disabled`) and tries the disk again later, backing
off. Each operation (put, take, done, reject, retry): docs/long-term-store.md, "The push's queue".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exporter.influx.lineproto import Chunk
from exporter.influx.replay import ReplayWindow
from exporter.influx.spill import SpillKey, SpillQueue

log = logging.getLogger(__name__)

BUFFER_DROP_REASONS = ("buffer_full", "rejected", "shutdown")
_OLD = float("-inf")  # enqueue time of a chunk put back: due at once
SPILL_RETRY_SECONDS = 5.0
SPILL_RETRY_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class Batch:
    """One write: its payload and where it came from (memory chunks, or a spill record)."""

    payload: bytes
    points: int
    chunks: tuple[Chunk, ...] = ()
    spill_key: SpillKey | None = None


@dataclass(frozen=True)
class BufferState:
    """Gauges and drop counts for the self metrics."""

    memory_points: int
    spill_points: int
    spill_bytes: int
    corrupt_records: int
    dropped: dict[str, int]
    down: bool
    replayed: int
    spill_disabled: bool = False
    spill_errors: int = 0


def coalesce(chunks: Sequence[Chunk], batch_size: int) -> list[tuple[bytes, int]]:
    """Consecutive chunks joined into records of at most `batch_size` points (a bigger chunk stays whole)."""
    out: list[tuple[bytes, int]] = []
    parts: list[bytes] = []
    points = 0
    for chunk in chunks:
        if parts and points + chunk.points > batch_size:
            out.append((b"".join(parts), points))
            parts, points = [], 0
        parts.append(chunk.payload)
        points += chunk.points
    if parts:
        out.append((b"".join(parts), points))
    return out


class PushBuffer:
    """Thread-safe: the sampler calls `put`, the sender `take` and then `done`, `reject` or `retry`."""

    def __init__(
        self,
        batch_size: int,
        max_points: int,
        spill: SpillQueue | None = None,
        clock: Callable[[], float] = time.monotonic,
        replay: ReplayWindow | None = None,
        *,
        spill_retry_seconds: float = SPILL_RETRY_SECONDS,
        spill_retry_max_seconds: float = SPILL_RETRY_MAX_SECONDS,
    ) -> None:
        self.batch_size = batch_size
        self.max_points = max_points
        self._spill = spill
        self._spill_retry = spill_retry_seconds
        self._spill_retry_max = spill_retry_max_seconds
        self._spill_wait = 0.0  # the current wait after a failure; 0 while the spill works
        self._spill_retry_at: float | None = None  # memory only until then
        self.spill_errors = 0
        self._replay = replay
        self.replayed = 0
        self._clock = clock
        self._cond = threading.Condition()
        self._memory: deque[tuple[Chunk, float]] = deque()
        self._memory_points = 0
        self._in_flight: Batch | None = None
        self._down = False
        self._flushing = False
        self._closed = False
        self.dropped = dict.fromkeys(BUFFER_DROP_REASONS, 0)

    # --- sampler side --------------------------------------------------------------------------------

    def put(self, chunks: Sequence[Chunk]) -> None:
        """Queue the chunks of one collection."""
        if not chunks:
            return
        with self._cond:
            if self._closed:
                self.dropped["shutdown"] += sum(c.points for c in chunks)
                return
            # Memory goes first (it is older: it may hold what came while the spill could not be used).
            if self._down and self._can_spill() and self._memory_to_spill() and self._to_spill(chunks):
                self._cond.notify_all()
                return
            now = self._clock()
            for chunk in chunks:
                self._memory.append((chunk, now))
                self._memory_points += chunk.points
            if self._memory_points > self.max_points:
                self._overflow()
            self._cond.notify_all()

    def _overflow(self) -> None:
        if self._can_spill() and self._memory_to_spill():
            return
        while self._memory_points > self.max_points and self._memory:
            chunk, _ = self._memory.popleft()
            self._memory_points -= chunk.points
            self.dropped["buffer_full"] += chunk.points

    def _memory_to_spill(self) -> bool:
        if self._memory and not self._to_spill([c for c, _ in self._memory]):
            return False
        self._memory.clear()
        self._memory_points = 0
        return True

    def _to_spill(self, chunks: Sequence[Chunk]) -> bool:
        assert self._spill is not None
        try:
            self._spill.append(coalesce(chunks, self.batch_size))
        except OSError as exc:
            self._spill_failed(f"cannot spill {sum(c.points for c in chunks)} points to disk", exc)
            return False
        self._spill_worked()
        return True

    def _can_spill(self) -> bool:
        """Whether writes may go to the spill: there is one, and it is not resting after a failure."""
        if self._spill is None:
            return False
        return self._spill_retry_at is None or self._clock() >= self._spill_retry_at

    def _spill_failed(self, what: str, exc: OSError) -> None:
        self.spill_errors += 1
        self._spill_wait = min(self._spill_retry_max, max(self._spill_retry, 2 * self._spill_wait))
        self._spill_retry_at = self._clock() + self._spill_wait
        log.error("%s: %s; keeping points in memory only, next try in %.0f s", what, exc, self._spill_wait)

    def _spill_worked(self) -> None:
        if self._spill_retry_at is not None:
            log.info("spilling to disk works again")
        self._spill_wait = 0.0
        self._spill_retry_at = None

    # --- sender side ---------------------------------------------------------------------------------

    def take(self, flush_interval: float, timeout: float) -> Batch | None:
        """The next batch to write, waiting up to `timeout` seconds for one to be due."""
        with self._cond:
            end = self._clock() + timeout
            while True:
                if not self._closed and self._in_flight is None:
                    batch = self._next_batch(flush_interval)
                    if batch is not None:
                        self._in_flight = batch
                        return batch
                now = self._clock()
                remaining = end - now
                if remaining <= 0:
                    return None
                if self._memory:
                    remaining = min(remaining, max(0.001, self._memory[0][1] + flush_interval - now))
                self._cond.wait(remaining)

    def _next_batch(self, flush_interval: float) -> Batch | None:
        if self._spill is not None and self._spill.points > 0:
            try:
                record = self._spill.peek()
            except OSError as exc:
                log.error("cannot read the spill queue: %s", exc)
                record = None
            if record is not None:
                return Batch(record.payload, record.points, spill_key=record.key)
        if not self._memory:
            return None
        due = self._clock() - self._memory[0][1] >= flush_interval
        if self._memory_points < self.batch_size and not due and not self._flushing:
            return None
        chunks: list[Chunk] = []
        points = 0
        while self._memory and (not chunks or points + self._memory[0][0].points <= self.batch_size):
            chunk, _ = self._memory.popleft()
            chunks.append(chunk)
            points += chunk.points
        self._memory_points -= points
        return Batch(b"".join(c.payload for c in chunks), points, tuple(chunks))

    def done(self, batch: Batch) -> bool:
        """The server took `batch`; False when the spill budget had dropped it meanwhile."""
        with self._cond:
            self._in_flight = None
            self._down = False
            kept = True
            if batch.spill_key is not None and self._spill is not None and not self._closed:
                kept = self._spill.ack(batch.spill_key)
            if self._replay is not None:
                self._replay.add(batch.payload, batch.points)
            self._cond.notify_all()
            return kept

    def reject(self, batch: Batch) -> None:
        """The server refused `batch` for good: drop it and count it."""
        with self._cond:
            self._in_flight = None
            self._down = False
            if batch.spill_key is not None and self._spill is not None and not self._closed:
                self._spill.ack(batch.spill_key)
            self.dropped["rejected"] += batch.points
            self._cond.notify_all()

    def retry(self, batch: Batch) -> None:
        """The write of `batch` failed: it goes back in front, and memory follows it to disk."""
        with self._cond:
            self._in_flight = None
            was_up, self._down = not self._down, True
            if self._closed:
                return
            if batch.spill_key is not None:
                assert self._spill is not None
                self._spill.release(batch.spill_key)
            elif not (self._can_spill() and self._push_front(batch)):
                self._memory.extendleft((c, _OLD) for c in reversed(batch.chunks))
                self._memory_points += batch.points
            if was_up and self._replay is not None:
                self._replay_in_front(self._replay.take())
            if self._can_spill():
                self._memory_to_spill()
            if self._memory_points > self.max_points:
                self._overflow()
            self._cond.notify_all()

    def _replay_in_front(self, batches: list[tuple[bytes, int]]) -> None:
        for payload, points in reversed(batches):
            if self._spill is not None and self._can_spill():
                if self._spill.bytes + len(payload) + 64 > self._spill.max_bytes:
                    return  # already written once: not worth evicting unwritten points for
                if not self._push_front(Batch(payload, points)):
                    return
            elif self._memory_points + points <= self.max_points:
                self._memory.appendleft((Chunk(payload, points, 0), _OLD))
                self._memory_points += points
            else:
                return
            self.replayed += points

    def _push_front(self, batch: Batch) -> bool:
        assert self._spill is not None
        try:
            self._spill.push_front(batch.payload, batch.points)
        except OSError as exc:
            self._spill_failed(f"cannot put {batch.points} points back into the spill", exc)
            return False
        self._spill_worked()
        return True

    # --- control -------------------------------------------------------------------------------------

    def flush(self) -> None:
        """From now on, send memory without waiting for a full batch or the flush interval."""
        with self._cond:
            self._flushing = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float, spill: bool = True, give_up_when_down: bool = False) -> bool:
        """Until memory (and the spill, with `spill`) is empty and nothing is in flight; False on timeout."""
        with self._cond:
            end = self._clock() + timeout
            while (
                self._memory
                or self._in_flight is not None
                or (spill and self._spill is not None and self._spill.points > 0)
            ):
                remaining = end - self._clock()
                if remaining <= 0 or (give_up_when_down and self._down):
                    return False
                self._cond.wait(min(remaining, 0.1))
            return True

    def state(self) -> BufferState:
        """Current gauges and drop counts."""
        with self._cond:
            spill = self._spill
            in_flight = self._in_flight
            memory = self._memory_points
            if in_flight is not None and in_flight.spill_key is None:
                memory += in_flight.points
            dropped = dict(self.dropped)
            if spill is not None:
                dropped.update(spill.dropped)
            return BufferState(
                memory,
                spill.points if spill is not None else 0,
                spill.bytes if spill is not None else 0,
                spill.corrupt_records if spill is not None else 0,
                dropped,
                self._down,
                self.replayed,
                self._spill is not None and not self._can_spill(),
                self.spill_errors,
            )

    def close(self) -> None:
        """Move memory and any batch in flight to the spill, then close it (without one they are lost)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            batch, self._in_flight = self._in_flight, None
            lost = 0
            if self._spill is not None:
                if batch is not None and batch.spill_key is None and not self._push_front(batch):
                    lost += batch.points
                if self._memory and not self._to_spill([c for c, _ in self._memory]):
                    lost += self._memory_points
                self._spill.close()
            else:
                lost = self._memory_points + (batch.points if batch is not None else 0)
            self._memory.clear()
            self._memory_points = 0
            if lost:
                self.dropped["shutdown"] += lost
                log.warning("%d points not yet written are lost at shutdown", lost)
            self._cond.notify_all()
