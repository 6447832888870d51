"""How GPU snapshots reach a scrape: read when scraped (`ReadOnScrape`), or sampled in the background and
served as they are (`GpuSampler`: one daemon thread per GPU; docs/gpu-collector.md says why).

Rules:
- A scrape takes each GPU's latest snapshot under a lock and never calls NVML.
- A GPU whose read has run past `deadline_seconds`, or whose last read ended more than interval + deadline
  ago, is served stale (up 0, stale 1, no values); the others are served fresh.
- NVML is opened (and the XID watcher started) on a background thread, retried while it fails; a scrape
  before that raises SourceError. Only the first scrape waits, up to half the deadline, for first reads.
- `close()` stops the threads; NVML is shut down only when no read is stuck in the driver.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from exporter.errors import SourceError
from exporter.sources.gpu_snapshot import GpuSnapshot
from exporter.sources.nvml_source import NvmlErrorCounts, NvmlSource
from exporter.sources.xid_events import XidWatcher

log = logging.getLogger(__name__)

MIN_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class SamplingSettings:
    """Background sampling cadences and the read deadline (seconds)."""

    interval_seconds: float = 1.0
    slow_interval_seconds: float = 10.0
    deadline_seconds: float = 2.0


@dataclass(frozen=True)
class GpuReading:
    """What a scrape serves for one GPU: its latest snapshot, its age, whether it is stale, its read time."""

    snapshot: GpuSnapshot
    age_seconds: float | None  # since its read finished; None before the first read
    stale: bool
    read_seconds_total: float  # time spent in this GPU's reads so far


class GpuReadings(Protocol):
    """Where the GPU collector gets its readings."""

    errors: NvmlErrorCounts
    xid: XidWatcher | None

    def readings(self) -> list[GpuReading]:
        """One reading per GPU in index order; SourceError when NVML is unavailable."""
        ...

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index`, or None."""
        ...

    def health_problem(self) -> str | None:
        """A reason for /healthz when some GPU's read is stuck, else None."""
        ...

    def close(self) -> None:
        """Stop reading; release NVML."""
        ...


class ReadOnScrape:
    """Reads every GPU, one after the other, at each scrape, as the exporter did before sampling.

    Used where each scrape must see the state as of that moment (the simulated cluster syncs its model
    right before collecting: `slow_interval_seconds` 0, every read slow) and by
    `--gpu.sample-interval-seconds 0` (the costly values still only every slow interval).
    """

    def __init__(
        self,
        source: NvmlSource,
        xid: XidWatcher | None = None,
        slow_interval_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.xid = xid
        self.errors = source.errors
        self._slow_interval = slow_interval_seconds
        self._clock = clock
        self._next_slow: list[float] = []
        self._read_seconds: list[float] = []

    def readings(self) -> list[GpuReading]:
        """Read every GPU now; start the XID watcher once NVML works."""
        self.source.open()
        count = self.source.device_count
        if len(self._read_seconds) != count:
            self._read_seconds, self._next_slow = [0.0] * count, [0.0] * count
        out = []
        for index in range(count):
            start = self._clock()
            slow = start >= self._next_slow[index]
            snapshot = self.source.read_gpu(index, slow=slow)
            if slow:
                self._next_slow[index] = start + self._slow_interval
            self._read_seconds[index] += self._clock() - start
            out.append(GpuReading(snapshot, 0.0, False, self._read_seconds[index]))
        if self.xid is not None:
            self.xid.ensure_started()
        return out

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index`, or None."""
        return self.source.uuid_of(index)

    def health_problem(self) -> str | None:
        """Reads happen in the scrape: the registry's deadline covers a stuck one."""
        return None

    def close(self) -> None:
        """Stop the XID thread and shut NVML down."""
        if self.xid is not None:
            self.xid.stop()
        self.source.close()


class _Slot:
    """One GPU's latest snapshot and the state of its read, guarded by the sampler's lock."""

    __slots__ = ("finished_at", "in_flight_since", "read_seconds", "snapshot")

    def __init__(self) -> None:
        self.snapshot: GpuSnapshot | None = None
        self.finished_at: float | None = None
        self.in_flight_since: float | None = None
        self.read_seconds = 0.0


class GpuSampler:
    """Samples every GPU in the background; see the module docstring."""

    def __init__(
        self,
        source: NvmlSource,
        settings: SamplingSettings,
        xid: XidWatcher | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.settings = settings
        self.xid = xid
        self.errors = source.errors
        self._clock = clock
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._slots: list[_Slot] = []
        self._threads: list[threading.Thread] = []
        self._opener: threading.Thread | None = None
        self._opened = False
        self._open_attempted = False
        self._open_error: str | None = None
        self._first_round_served = False

    # --- background ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start opening NVML and sampling (idempotent; nothing touches NVML before this)."""
        with self._cond:
            if self._opener is not None or self._stop.is_set():
                return
            self._opener = threading.Thread(target=self._open_loop, name="nvml-open", daemon=True)
            self._opener.start()

    def _open_loop(self) -> None:
        retry = max(MIN_RETRY_SECONDS, self.settings.interval_seconds)
        while not self._stop.is_set():
            try:
                self.source.open()
            except SourceError as exc:
                with self._cond:
                    if self._open_error is None:
                        log.warning("GPU sampling waits for NVML: %s", exc)
                    self._open_error = str(exc)
                    self._open_attempted = True
                    self._cond.notify_all()
                self._stop.wait(retry)
                continue
            break
        with self._cond:
            if self._stop.is_set():
                return
            self._slots = [_Slot() for _ in range(self.source.device_count)]
            self._opened, self._open_attempted, self._open_error = True, True, None
            for index in range(len(self._slots)):
                thread = threading.Thread(
                    target=self._sample, args=(index,), name=f"nvml-gpu{index}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._cond.notify_all()
        while self.xid is not None and not self._stop.is_set() and not self.xid.ensure_started():
            self._stop.wait(max(retry, self.settings.slow_interval_seconds))

    def _sample(self, index: int) -> None:
        slot = self._slots[index]
        settings = self.settings
        next_slow = 0.0
        failure_logged = False
        # After the first read, the GPUs' reads are spread over the interval instead of all at once (the
        # Python side of eight reads at the same moment would hold up a scrape that lands then): GPU i's
        # second read comes i/n of an interval after its first, never later than a whole interval.
        stagger = settings.interval_seconds * index / max(1, len(self._slots))
        while not self._stop.is_set():
            start = self._clock()
            slow = start >= next_slow
            with self._cond:
                slot.in_flight_since = start
            snapshot: GpuSnapshot | None
            try:
                snapshot = self.source.read_gpu(index, slow=slow)
            except Exception:  # a bug, not NVML (the source handles NVML errors): keep the thread alive
                if not failure_logged:
                    log.exception("reading GPU %d failed", index)
                    failure_logged = True
                snapshot = None
            end = self._clock()
            with self._cond:
                slot.in_flight_since = None
                slot.read_seconds += end - start
                if snapshot is not None:
                    slot.snapshot, slot.finished_at = snapshot, end
                self._cond.notify_all()
            if slow and snapshot is not None:
                next_slow = start + settings.slow_interval_seconds + stagger
            gap = stagger if stagger > 0 else settings.interval_seconds
            self._stop.wait(max(0.0, start + gap - self._clock()))
            stagger = 0.0

    # --- serving ---------------------------------------------------------------------------------

    def readings(self) -> list[GpuReading]:
        """Each GPU's latest snapshot; waits only at the first scrape (up to half the deadline)."""
        self.start()
        deadline = self._clock() + self.settings.deadline_seconds / 2  # within the registry's deadline
        with self._cond:
            if not self._first_round_served:
                self._wait_first_round(deadline)
                self._first_round_served = self._opened
            if not self._opened:
                raise SourceError(self._open_error or "NVML has not opened yet")
            now = self._clock()
            return [self._reading(index, slot, now) for index, slot in enumerate(self._slots)]

    def _wait_first_round(self, deadline: float) -> None:
        def ready() -> bool:
            if not self._opened:
                return self._open_attempted
            return all(slot.snapshot is not None for slot in self._slots)

        while not ready():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            self._cond.wait(remaining)

    def _reading(self, index: int, slot: _Slot, now: float) -> GpuReading:
        settings = self.settings
        age = None if slot.finished_at is None else now - slot.finished_at
        stuck = slot.in_flight_since is not None and now - slot.in_flight_since > settings.deadline_seconds
        late = age is not None and age > settings.interval_seconds + settings.deadline_seconds
        snapshot = slot.snapshot if slot.snapshot is not None else GpuSnapshot(index, False)
        return GpuReading(snapshot, age, stuck or late, slot.read_seconds)

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index`, or None."""
        return self.source.uuid_of(index)

    def health_problem(self) -> str | None:
        """Which GPUs' reads are stuck (for /healthz), or None."""
        with self._cond:
            if not self._opened:
                return None
            now = self._clock()
            stale = [i for i, slot in enumerate(self._slots) if self._reading(i, slot, now).stale]
        if not stale:
            return None
        gpus = ", ".join(map(str, stale))
        return f"NVML reads of GPU {gpus} stuck beyond {self.settings.deadline_seconds:g} s"

    def close(self) -> None:
        """Stop sampling; shut NVML down unless a read is still stuck in the driver."""
        self._stop.set()
        with self._cond:
            threads = [t for t in (self._opener, *self._threads) if t is not None]
        give_up = time.monotonic() + self.settings.interval_seconds + 1.0
        for thread in threads:
            thread.join(max(0.0, give_up - time.monotonic()))
        if self.xid is not None:
            self.xid.stop()
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            log.warning("NVML reads still stuck at exit (%s); not shutting NVML down", ", ".join(stuck))
            return
        self.source.close()
