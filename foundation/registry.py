"""Runs the collectors for one scrape, each under a deadline, and keeps the state /healthz reads.

Rules: every collector has a deadline (its own from `deadlines`, else `default_deadline_seconds`) and
runs on its own worker thread, so a hung call fails that collector, not the scrape; until the hung call
returns, later runs of it fail at once. A collector that only serves a snapshot taken elsewhere says so
with `serves_snapshot = True` and runs inline, without the thread handoff. `state()` and `refresh()`
never wait on a collection. Design notes: docs/node-exporter.md.
"""

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

DEFAULT_DEADLINE_SECONDS = 5.0  # under Prometheus' default 10 s scrape timeout
STUCK_GRACE_SECONDS = 1.0  # slack before a collection that overran every deadline counts as stuck

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
    finished_at: float  # the registry's clock
    error: str | None = None


@dataclass(frozen=True)
class RegistryState:
    """What health judges, read without waiting: the last outcomes and what is running now."""

    statuses: dict[str, CollectorStatus]
    last_collection_age: float | None  # None before the first collection completed
    collecting_for: float | None  # seconds the collection in progress has run; None when none is
    collection_deadline: float  # a collection running longer than this is stuck
    stuck: dict[str, tuple[float, float]]  # collector -> (seconds its call has run, its deadline)


def serves_snapshot(collector: Collector) -> bool:
    """True for a collector that only hands out a snapshot taken elsewhere (runs inline, cheaply)."""
    return getattr(collector, "serves_snapshot", False) is True


class DeadlineWorker:
    """One daemon thread (started on first use) that runs a collector's calls so the caller can stop waiting.

    A call that overruns its deadline keeps the thread busy; until it returns, later calls fail at once
    instead of piling up threads behind a hung driver.
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._clock = clock
        self._jobs: queue.SimpleQueue[tuple[Job, Future[list[MetricFamily]]] | None] = queue.SimpleQueue()
        self._busy: Future[list[MetricFamily]] | None = None
        self._busy_since = 0.0
        self._thread: threading.Thread | None = None

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
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"collector-{self._name}", daemon=True)
            self._thread.start()
        future: Future[list[MetricFamily]] = Future()
        self._busy_since = self._clock()  # before _busy: a reader never pairs a new call with an old start
        self._busy = future
        self._jobs.put((job, future))
        try:
            return future.result(timeout=deadline)
        except FutureTimeout:
            raise CollectorTimeoutError(f"no answer within {deadline:g} s") from None

    def busy_for(self) -> float | None:
        """Seconds the current call has run, or None when the worker is idle."""
        busy = self._busy
        if busy is None or busy.done():
            return None
        return self._clock() - self._busy_since

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
        default_deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
    ) -> None:
        self._collectors = list(collectors)
        self._clock = clock
        given = deadlines or {}
        self._deadlines = {c.name: given.get(c.name, default_deadline_seconds) for c in self._collectors}
        self._workers = {
            c.name: DeadlineWorker(c.name, clock) for c in self._collectors if not serves_snapshot(c)
        }
        self._collection_deadline = sum(self._deadlines.values()) + STUCK_GRACE_SECONDS
        self._collect_lock = threading.Lock()  # one collection at a time
        self._state_lock = threading.Lock()  # guards what follows; never held while a collector runs
        self._status: dict[str, CollectorStatus] = {}
        self._last_collection: float | None = None
        self._collecting_since: float | None = None
        self._refreshing = False
        self._closed = False

    @property
    def collector_names(self) -> list[str]:
        """Names of the collectors, in run order."""
        return [c.name for c in self._collectors]

    def deadline(self, name: str) -> float:
        """The deadline of collector `name`, in seconds."""
        return self._deadlines[name]

    def collect(self) -> list[MetricFamily]:
        """Run every collector once (one collection at a time) and return all families."""
        with self._collect_lock:
            with self._state_lock:
                self._collecting_since = self._clock()
            try:
                return self._collect()
            finally:
                with self._state_lock:
                    self._collecting_since = None

    def _collect(self) -> list[MetricFamily]:
        families: list[MetricFamily] = []
        success = MetricFamily(COLLECTOR_SUCCESS)
        duration = MetricFamily(COLLECTOR_DURATION)
        for collector in self._collectors:
            status = self._run_one(collector, families)
            with self._state_lock:
                self._status[collector.name] = status
            success.add((collector.name,), 1 if status.success else 0)
            duration.add((collector.name,), status.duration_seconds)
        build = MetricFamily(BUILD_INFO)
        build.add_info((__version__,))
        families.extend((success, duration, build))
        with self._state_lock:
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
        with self._state_lock:
            return dict(self._status)

    def last_collection_age(self) -> float | None:
        """Seconds since the last complete collection, or None before the first."""
        last = self._last_collection
        return None if last is None else self._clock() - last

    def state(self) -> RegistryState:
        """The last outcomes, what runs now and what is stuck; never waits on a collector."""
        now = self._clock()
        with self._state_lock:
            statuses = dict(self._status)
            last, since = self._last_collection, self._collecting_since
        stuck: dict[str, tuple[float, float]] = {}
        for name, worker in self._workers.items():
            busy = worker.busy_for()
            if busy is not None and busy > self._deadlines[name]:
                stuck[name] = (busy, self._deadlines[name])
        return RegistryState(
            statuses=statuses,
            last_collection_age=None if last is None else now - last,
            collecting_for=None if since is None else now - since,
            collection_deadline=self._collection_deadline,
            stuck=stuck,
        )

    def refresh(self) -> bool:
        """Start a collection on a background thread unless one is running; True when one was started."""
        with self._state_lock:
            if self._refreshing or self._closed or self._collecting_since is not None:
                return False
            self._refreshing = True
        threading.Thread(target=self._refresh, name="registry-refresh", daemon=True).start()
        return True

    def _refresh(self) -> None:
        try:
            self.collect()
        except Exception:  # a background collection has nobody to raise to
            log.exception("background collection failed")
        finally:
            with self._state_lock:
                self._refreshing = False

    def close(self) -> None:
        """Stop the worker threads and close every collector."""
        with self._state_lock:
            self._closed = True
        for worker in self._workers.values():
            worker.stop()
        for collector in self._collectors:
            try:
                collector.close()
            except Exception:
                log.exception("closing collector %s failed", collector.name)
