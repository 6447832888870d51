"""Runs sweeps on a background loop (foundation.loop) and keeps the last complete one, with its age.

Scrapes never run a diagnostic: they get the families built once at the end of the last complete sweep.
Data is judged by its age, never by the sweep that served it: the sweep's own age, and the age of the
topology it used (older when discovery failed and the last good topology was used again). Past
`max_age_seconds` either one makes the data stale (`stale_reason`): the collector then serves nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from exporter.fabric.model import SweepResult
from foundation.exposition import MetricFamily
from foundation.loop import Loop

log = logging.getLogger(__name__)

Builder = Callable[[SweepResult], list[MetricFamily]]


class SweepSource(Protocol):
    """What the background loop sweeps: the real `Sweeper`, or a simulated fabric (simulator.serve)."""

    def sweep(self) -> SweepResult:
        """One complete sweep."""
        ...


@dataclass(frozen=True)
class Published:
    """A complete sweep and its metric families; `published_at` (the sweeper's clock) is its end."""

    result: SweepResult
    families: tuple[MetricFamily, ...]
    published_at: float


@dataclass(frozen=True)
class Ages:
    """How old the served data is now: the last complete sweep, and the topology it used."""

    sweep_seconds: float
    topology_seconds: float


class BackgroundSweeper:
    """Sweeps every `interval_seconds` (back to back when a sweep takes longer) until stopped."""

    def __init__(
        self,
        sweeper: SweepSource,
        interval_seconds: float,
        build: Builder,
        max_age_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sweeper = sweeper
        self._loop = Loop("fabric-sweep", interval_seconds, self.run_once)
        self._build = build
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._swept = threading.Condition()
        self._latest: Published | None = None
        self._last_error: str | None = None
        self._outcomes: Counter[str] = Counter()
        self._skipped: Counter[str] = Counter()

    @property
    def latest(self) -> Published | None:
        """The last complete sweep, or None before the first."""
        return self._latest

    def start(self) -> None:
        """Start the sweep thread (the first sweep begins at once)."""
        self._loop.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to stop after its current sweep and wait for it."""
        self._loop.stop(timeout)

    def run_once(self) -> Published | None:
        """Sweep now in this thread and publish the result; None (and logged) when the sweep failed."""
        try:
            result = self._sweeper.sweep()
            ended = self._clock()
            published = Published(result, tuple(self._build(result)), ended)
        except Exception as exc:  # a failed sweep keeps the previous one served; health reports it
            self._last_error = f"{type(exc).__name__}: {exc}"
            log.warning("fabric sweep failed: %s", self._last_error, exc_info=not isinstance(exc, OSError))
            published = None
        else:
            self._last_error = None
            self._latest = published
            self._report(result)
        with self._swept:
            self._outcomes["failed" if published is None else "complete"] += 1
            if published is not None:
                self._skipped.update(published.result.skipped_lines)
            self._swept.notify_all()
        return published

    def wait_for_sweeps(self, count: int, timeout: float) -> bool:
        """Block until `count` sweep attempts have ended since start (tests and benchmarks)."""
        with self._swept:
            return self._swept.wait_for(lambda: sum(self._outcomes.values()) >= count, timeout)

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Sweeps ended by result (complete, failed) and output lines skipped by program, since start."""
        with self._swept:
            return dict(self._outcomes), dict(self._skipped)

    def ages(self, published: Published) -> Ages:
        """How old `published` and its topology are now."""
        sweep = max(0.0, self._clock() - published.published_at)
        return Ages(sweep, sweep + published.result.topology_lag)

    def stale_reason(self, published: Published) -> str | None:
        """Why `published` may no longer be served as current (too old, or its topology is), or None."""
        ages, bound = self.ages(published), f"(max {self.max_age_seconds:g} s)"
        if ages.sweep_seconds > self.max_age_seconds:
            return f"last complete fabric sweep is {ages.sweep_seconds:.0f} s old {bound}"
        if ages.topology_seconds > self.max_age_seconds:
            return f"fabric topology is {ages.topology_seconds:.0f} s old {bound}: discovery has failed since"
        return None

    @staticmethod
    def _report(result: SweepResult) -> None:
        down = [guid for guid, reading in result.readings.items() if not reading.up]
        log.debug(
            "fabric sweep took %.3f s: %d nodes read, %d not answering, %d vanished",
            result.duration_seconds,
            len(result.readings),
            len(down),
            len(result.vanished),
        )
        for problem in result.problems:
            log.warning("fabric sweep: %s", problem)
        if result.skipped_lines:
            log.warning(
                "fabric sweep skipped unparseable or out-of-range output lines: %s",
                dict(result.skipped_lines),
            )
        unrouted = result.route_failures
        if unrouted:
            log.warning(
                "fabric sweep: forwarding tables of %d switch(es) unreadable (last good ones kept): %s",
                len(unrouted),
                "; ".join(unrouted[:5]) + (f" (and {len(unrouted) - 5} more)" if len(unrouted) > 5 else ""),
            )
        failed = result.vlarb_failures
        if failed:
            more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
            log.warning(
                "fabric sweep: VL arbitration tables of %d port(s) unreadable: %s%s",
                len(failed),
                "; ".join(failed[:5]),
                more,
            )

    def health_problem(self) -> str | None:
        """Why the fabric data is not trustworthy now, or None when it is."""
        if not self._loop.alive():
            return "fabric sweep thread has stopped"
        latest = self._latest
        if latest is None:
            return f"no complete fabric sweep yet{f' ({self._last_error})' if self._last_error else ''}"
        stale = self.stale_reason(latest)
        if stale is not None:
            return stale
        if self._last_error is not None:
            return f"last fabric sweep failed: {self._last_error}"
        if latest.result.problems:
            return "fabric sweep: " + "; ".join(latest.result.problems)
        return None
