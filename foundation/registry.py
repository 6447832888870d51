"""Runs the collectors for one scrape, each under a deadline, and keeps the state /healthz reads.

Rules: every collector has a deadline (its own from `deadlines`, else `default_deadline_seconds`) and
runs on a background thread (`foundation.deadlines`), so a hung call fails that collector, not the
scrape; until the hung call returns, later runs of it fail at once. A collector that only serves a
snapshot taken elsewhere says so with `serves_snapshot = True` and runs inline, first, without the
thread handoff. `state()` and `refresh()` never wait on a collection. Design: docs/node-exporter.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from foundation.collector import Collector
from foundation.deadlines import DeadlineRunner, Timed
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
        self._inline = [c for c in self._collectors if serves_snapshot(c)]
        self._background = [c for c in self._collectors if not serves_snapshot(c)]
        self._runner = DeadlineRunner(",".join(c.name for c in self._background), clock)
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
        timed: dict[str, Timed] = {}
        for collector in self._inline:  # snapshots first: the others may ask them (jobs asks gpu for UUIDs)
            start = time.perf_counter()
            try:
                timed[collector.name] = (collector.collect(), time.perf_counter() - start)
            except Exception as exc:
                timed[collector.name] = (exc, time.perf_counter() - start)
        if self._background:
            timed.update(self._runner.run(self._background, self._deadlines))
        families: list[MetricFamily] = []
        success = MetricFamily(COLLECTOR_SUCCESS)
        duration = MetricFamily(COLLECTOR_DURATION)
        statuses: dict[str, CollectorStatus] = {}
        for collector in self._collectors:
            outcome, seconds = timed[collector.name]
            error = None
            if isinstance(outcome, BaseException):
                error = f"{type(outcome).__name__}: {outcome}"
                log.warning("collector %s failed: %s", collector.name, error)
            else:
                families.extend(outcome)
            statuses[collector.name] = CollectorStatus(error is None, seconds, self._clock(), error)
            success.add((collector.name,), 1 if error is None else 0)
            duration.add((collector.name,), seconds)
        build = MetricFamily(BUILD_INFO)
        build.add_info((__version__,))
        families.extend((success, duration, build))
        with self._state_lock:
            self._status.update(statuses)
            self._last_collection = self._clock()
        return families

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
        stuck = {name: (now - since, self._deadlines[name]) for name, since in self._runner.hung().items()}
        running = self._runner.running()
        if running is not None and now - running[1] > self._deadlines[running[0]]:
            stuck[running[0]] = (now - running[1], self._deadlines[running[0]])
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
        self._runner.close()
        for collector in self._collectors:
            try:
                collector.close()
            except Exception:
                log.exception("closing collector %s failed", collector.name)
