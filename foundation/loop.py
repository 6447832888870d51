"""The one background loop: a daemon thread that runs an action now (or after one interval) and then every
interval, on a fixed schedule that never catches up (a run that overran is followed by the next at once,
not by a burst). A failing action is logged and the loop goes on.

`runs` counts finished runs, failed ones too; `wait_for_runs` blocks on a condition, so tests wait for
runs instead of sleeping. `alive()` is False only when the thread was started and has died unstopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def next_due(due: float, interval: float, now: float) -> float:
    """When the run after the one due at `due` is due: one interval later, or `now` when that has passed
    (a late run is not made up for by a burst of runs)."""
    return max(due + interval, now)


class Loop:
    """Calls `action` every `interval_seconds` on a daemon thread named `name`, from `start` to `stop`."""

    def __init__(
        self,
        name: str,
        interval_seconds: float,
        action: Callable[[], object],
        *,
        run_at_start: bool = True,
    ) -> None:
        if not interval_seconds > 0:
            raise ValueError(f"{name}: interval must be > 0, not {interval_seconds!r}")
        self.name = name
        self.interval_seconds = interval_seconds
        self._action = action
        self._run_at_start = run_at_start
        self._stop = threading.Event()
        self._ran = threading.Condition()
        self._runs = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; RuntimeError when it was started before."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: loop already started")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop after the current run and wait up to `timeout` seconds; True once the thread has ended."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        if thread is not threading.current_thread():
            thread.join(timeout)
        return not thread.is_alive()

    def alive(self) -> bool:
        """False only when the thread was started and has ended without being stopped."""
        thread = self._thread
        return thread is None or thread.is_alive() or self._stop.is_set()

    @property
    def runs(self) -> int:
        """How many runs have finished (failed ones included)."""
        with self._ran:
            return self._runs

    def wait_for_runs(self, count: int, timeout: float) -> bool:
        """Block until `count` runs have finished; False when `timeout` seconds passed first."""
        with self._ran:
            return self._ran.wait_for(lambda: self._runs >= count, timeout)

    def _run(self) -> None:
        next_at = time.monotonic() + (0.0 if self._run_at_start else self.interval_seconds)
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            try:
                self._action()
            except Exception:  # the loop outlives a failing action; the owner's health check reports it
                log.exception("%s failed", self.name)
            with self._ran:
                self._runs += 1
                self._ran.notify_all()
            next_at = next_due(next_at, self.interval_seconds, time.monotonic())
