"""Runs the enabled collectors for one scrape, with deadlines, and reports how each one did."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from foundation.collector import Collector
from foundation.errors import CollectorTimeoutError
from foundation.exposition import MetricFamily, MetricSpec
from foundation.version import __version__

log = logging.getLogger(__name__)

# The self metrics every ibpool exporter serves (listed in exporter.catalog with the rest).
COLLECTOR_SUCCESS = MetricSpec(
    "ibpool_exporter_collector_success",
    "gauge",
    "1 if the collector's last run succeeded.",
    ("collector",),
)
COLLECTOR_DURATION = MetricSpec(
    "ibpool_exporter_collector_duration_seconds",
    "gauge",
    "How long the collector's last run took.",
    ("collector",),
)
BUILD_INFO = MetricSpec("ibpool_build_info", "info", "ibpool version; value is always 1.", ("version",))

Job = Callable[[], list[MetricFamily]]


@dataclass(frozen=True)
class CollectorStatus:
    """Outcome of a collector's most recent run."""

    success: bool
    duration_seconds: float
    finished_at: float  # time.monotonic()
    error: str | None = None


class DeadlineWorker:
    """One daemon thread that runs a collector's calls so that the caller can stop waiting.

    A call that overruns its deadline keeps the thread busy; until it returns, later calls fail at once
    instead of piling up threads behind a hung driver.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Job, Future[list[MetricFamily]]] | None] = queue.SimpleQueue()
        self._busy: Future[list[MetricFamily]] | None = None
        self._thread = threading.Thread(target=self._run, name=f"collector-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to the waiting caller, which logs it
                future.set_exception(exc)

    def call(self, job: Job, deadline: float) -> list[MetricFamily]:
        """Run `job` on the worker thread; raise CollectorTimeoutError past `deadline` seconds."""
        if self._busy is not None and not self._busy.done():
            raise CollectorTimeoutError("previous run has not returned yet (hung call)")
        future: Future[list[MetricFamily]] = Future()
        self._busy = future
        self._jobs.put((job, future))
        try:
            return future.result(timeout=deadline)
        except FutureTimeout:
            raise CollectorTimeoutError(f"no answer within {deadline:g} s") from None

    def stop(self) -> None:
        """Ask the thread to end after its current call."""
        self._jobs.put(None)


class Registry:
    """The exporter's collectors; `collect` runs them all once and adds the self metrics."""

    def __init__(
        self,
        collectors: Sequence[Collector],
        deadlines: dict[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._collectors = list(collectors)
        self._clock = clock
        self._deadlines = dict(deadlines or {})
        self._workers = {name: DeadlineWorker(name) for name in self._deadlines}
        self._status: dict[str, CollectorStatus] = {}
        self._lock = threading.Lock()
        self._last_collection: float | None = None

    @property
    def collector_names(self) -> list[str]:
        """Names of the collectors, in run order."""
        return [c.name for c in self._collectors]

    def collect(self) -> list[MetricFamily]:
        """Run every collector once (one scrape at a time) and return all families."""
        with self._lock:
            families: list[MetricFamily] = []
            success = MetricFamily(COLLECTOR_SUCCESS)
            duration = MetricFamily(COLLECTOR_DURATION)
            for collector in self._collectors:
                status = self._run_one(collector, families)
                self._status[collector.name] = status
                success.add((collector.name,), 1 if status.success else 0)
                duration.add((collector.name,), status.duration_seconds)
            build = MetricFamily(BUILD_INFO)
            build.add_info((__version__,))
            families.extend((success, duration, build))
            self._last_collection = self._clock()
            return families

    def _run_one(self, collector: Collector, out: list[MetricFamily]) -> CollectorStatus:
        start = time.perf_counter()
        error: str | None = None
        try:
            worker = self._workers.get(collector.name)
            if worker is None:
                result = collector.collect()
            else:
                result = worker.call(collector.collect, self._deadlines[collector.name])
            out.extend(result)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("collector %s failed: %s", collector.name, error)
        elapsed = time.perf_counter() - start
        return CollectorStatus(error is None, elapsed, self._clock(), error)

    def status(self) -> dict[str, CollectorStatus]:
        """The latest outcome of each collector that has run."""
        with self._lock:
            return dict(self._status)

    def last_collection_age(self) -> float | None:
        """Seconds since the last complete collection, or None before the first."""
        last = self._last_collection
        return None if last is None else self._clock() - last

    def close(self) -> None:
        """Stop the worker threads and close every collector."""
        for worker in self._workers.values():
            worker.stop()
        for collector in self._collectors:
            try:
                collector.close()
            except Exception:
                log.exception("closing collector %s failed", collector.name)
