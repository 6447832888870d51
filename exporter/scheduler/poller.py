"""Polls the scheduler in the background at a fixed interval and keeps the outcome for the collector.

Scrapes never run Slurm commands: they read `state()`. A failed poll is recorded (with a log line when
the error is new) and never replaces the last good snapshot; the collector decides what to serve.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from exporter.scheduler.errors import SchedulerError
from exporter.scheduler.pools import SchedulerSnapshot
from foundation.loop import Loop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PollState:
    """The outcome of the latest poll and the last successful one.

    `ok` is None before the first poll has finished. `success_monotonic` (time.monotonic) and
    `success_unix` (time.time) date the end of the last successful poll, which produced `snapshot`.
    """

    ok: bool | None = None
    error: str | None = None
    duration_seconds: float = 0.0
    snapshot: SchedulerSnapshot | None = None
    success_monotonic: float | None = None
    success_unix: float | None = None


class SchedulerPoller:
    """Calls `read` now and then every `interval_seconds` on a daemon thread (or on demand: poll_once)."""

    def __init__(
        self,
        read: Callable[[], SchedulerSnapshot],
        interval_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._read = read
        self._loop = Loop("scheduler-poller", interval_seconds, self.poll_once)
        self._clock = clock
        self._wall = wall_clock
        self._state = PollState()
        self._lock = threading.Lock()

    def state(self) -> PollState:
        """The latest outcome (an immutable record, safe to read from any thread)."""
        with self._lock:
            return self._state

    def poll_once(self) -> PollState:
        """Run one poll now and record its outcome; never raises for a failed poll."""
        start = self._clock()
        snapshot: SchedulerSnapshot | None = None
        error: str | None = None
        try:
            snapshot = self._read()
        except SchedulerError as exc:
            error = str(exc)
        except Exception as exc:  # a bug in a parser must not kill the polling thread
            log.exception("scheduler poll crashed")
            error = f"{type(exc).__name__}: {exc}"
        end = self._clock()
        with self._lock:
            previous = self._state
            if snapshot is not None:
                self._state = PollState(True, None, end - start, snapshot, end, self._wall())
            else:
                self._state = PollState(
                    False,
                    error,
                    end - start,
                    previous.snapshot,
                    previous.success_monotonic,
                    previous.success_unix,
                )
            state = self._state
        self._log_transition(previous, state)
        return state

    @staticmethod
    def _log_transition(previous: PollState, current: PollState) -> None:
        if not current.ok and (previous.ok is not False or previous.error != current.error):
            log.warning("scheduler poll failed: %s", current.error)
        elif current.ok and previous.ok is False:
            log.info("scheduler poll succeeded again after: %s", previous.error)

    def start(self) -> None:
        """Start polling on a daemon thread: once at once, then every interval (RuntimeError if started)."""
        self._loop.start()

    def health_problem(self) -> str | None:
        """Why polling has stopped for good (its thread died), or None."""
        return None if self._loop.alive() else "scheduler poll thread has stopped"

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread after its current poll (which ends within the command timeouts)."""
        self._loop.stop(timeout)
