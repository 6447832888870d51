"""Pushes the exporter's samples to InfluxDB (line protocol over `/api/v2/write`) at its own interval.

It samples its own `Registry` over its own collector instances, so the scrapes' averaging windows are
untouched. A point keeps its collection's timestamp, so sending it again is idempotent. A failed write is
retried with backoff, without limit, its batch first in line; while the server is down points spill to disk
(`buffer`, `spill`); `close()` spills what is left in memory; after a failure the batches acknowledged in
the last `replay_seconds` are sent again. A point dropped (past a budget, refused by the server, not
finite) is counted by reason. Design, and why not influxdb-client's batching `WriteApi`:
docs/long-term-store.md, "The exporter's push".
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from exporter.influx.backoff import Backoff
from exporter.influx.buffer import PushBuffer
from exporter.influx.lineproto import LineEncoder
from exporter.influx.metrics import PushCollector, PushStats
from exporter.influx.replay import ReplayWindow
from exporter.influx.settings import PushSettings
from exporter.influx.spill import SpillQueue
from exporter.influx.writer import InfluxWriter, Writer
from foundation.collector import Collector
from foundation.exposition import MetricFamily
from foundation.loop import Loop
from foundation.registry import Registry

log = logging.getLogger(__name__)

Source = Callable[[], list[MetricFamily]]


class InfluxPusher:
    """Samples `source` on a thread and writes the points on another; `close()` stops both."""

    def __init__(
        self,
        settings: PushSettings,
        source: Source,
        writer: Writer | None = None,
        *,
        clock_ns: Callable[[], int] = time.time_ns,
        rng: Callable[[], float] = random.random,
        closers: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.settings = settings
        self._source = source
        self._clock_ns = clock_ns
        self._closers = list(closers)
        s = settings
        spill = None
        if s.spill_directory is not None:
            spill = SpillQueue(s.spill_directory, s.spill_max_bytes, s.spill_segment_bytes)
        replay = ReplayWindow(s.replay_seconds, s.buffer_points) if s.replay_seconds > 0 else None
        self.buffer = PushBuffer(s.batch_size, s.buffer_points, spill, replay=replay)
        self.stats = PushStats()
        self.encoder = LineEncoder(s.batch_size, target=s.target_labels)
        self._writer = writer or InfluxWriter(
            s.url, s.bucket, org=s.org, token=s.token, timeout_seconds=s.timeout_seconds, gzip=s.gzip
        )
        self._backoff = Backoff(
            s.retry_initial_seconds, s.retry_exponential_base, s.retry_max_seconds, s.jitter, rng
        )
        self._sampler = Loop("influx-sampler", settings.interval_seconds, self._sample_logged)
        self._stop_sending = threading.Event()
        self._sender: threading.Thread | None = None
        self._closed = False

    @property
    def collector(self) -> Collector:
        """The self metrics, as a collector for the exporter's scrape registry."""
        return PushCollector(self.stats, self.buffer.state)

    def start(self, sample: bool = True) -> None:
        """Start the sender (it drains any spill left by a previous run) and, with `sample`, the sampler."""
        self._sender = threading.Thread(target=self._send_loop, name="influx-sender", daemon=True)
        self._sender.start()
        if sample:
            self._sampler.start()

    def sample_once(self, timestamp_ns: int | None = None) -> int:
        """Collect once and queue the points, stamped with the collection's start; the points queued."""
        stamp = self._clock_ns() if timestamp_ns is None else timestamp_ns
        return self.offer(self._source(), stamp)

    def offer(self, families: Iterable[MetricFamily], timestamp_ns: int) -> int:
        """Encode and queue families collected at `timestamp_ns`; the points queued."""
        chunks, skipped = self.encoder.encode(families, timestamp_ns)
        if skipped:
            self.stats.not_finite(skipped)
        self.buffer.put(chunks)
        return sum(c.points for c in chunks)

    def _sample_logged(self) -> None:
        self.sample_once()  # a failure is logged by the loop, which goes on (a collection bug never ends it)

    def _send_loop(self) -> None:
        s = self.settings
        while not self._stop_sending.is_set():
            batch = self.buffer.take(s.flush_interval_seconds, timeout=0.2)
            if batch is None:
                continue
            result = self._writer.write(batch.payload)
            if result.outcome == "ok":
                self.buffer.done(batch)
                self.stats.written(batch.points)
                if self._backoff.attempt:
                    log.info("influx push: writes succeed again after %d failures", self._backoff.attempt)
                self._backoff.reset()
            elif result.outcome == "reject":
                self.buffer.reject(batch)
                log.error("influx push: server refused %d points for good: %s", batch.points, result.detail)
            else:
                self.buffer.retry(batch)
                self.stats.retried(batch.points)
                delay = self._backoff.next_delay(result.retry_after)
                level = logging.WARNING if self._backoff.attempt == 1 else logging.DEBUG
                log.log(level, "influx push: write failed (%s); retry in %.1f s", result.detail, delay)
                self._stop_sending.wait(delay)

    def close(self, drain_seconds: float | None = None) -> None:
        """Stop sampling, send what memory holds for up to `drain_seconds` while the server takes it,
        stop the sender and keep the rest in the spill for the next start."""
        if self._closed:
            return
        self._closed = True
        self._sampler.stop()
        if self._sender is not None:
            drain = self.settings.drain_seconds if drain_seconds is None else drain_seconds
            self.buffer.flush()
            self.buffer.wait_idle(drain, spill=False, give_up_when_down=True)
        self._stop_sending.set()
        if self._sender is not None:
            self._sender.join(self.settings.timeout_seconds + 5.0)
        self.buffer.close()
        self._writer.close()
        for closer in self._closers:
            closer()


def start_push(
    settings: PushSettings, collectors: Sequence[Collector], deadlines: dict[str, float] | None = None
) -> InfluxPusher:
    """A started pusher sampling its own registry over `collectors` (closed with the pusher)."""
    registry = Registry(collectors, deadlines)
    try:
        pusher = InfluxPusher(settings, registry.collect, closers=[registry.close])
    except BaseException:
        registry.close()
        raise
    pusher.start()
    return pusher
