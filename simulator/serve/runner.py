"""Runs a ClusterModel in the background at `speed` simulated seconds per wall second, behind one lock.

Every read and change of the model goes through `locked()`. The thread wakes every `step_seconds` of
wall time and advances the model by the wall time elapsed times `speed`; when the model cannot keep up,
simulated time runs slower (at most `MAX_CATCH_UP` steps' worth per wake-up), never in bursts. Listeners
registered with `on_change` run after a control, a fault or a manual `advance` (outside the lock), so
the exporters' caches show the change at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from simulator.cluster.model import ClusterModel

log = logging.getLogger(__name__)

MAX_CATCH_UP = 4


class ClusterRunner:
    """The model, its lock and the thread that moves its clock."""

    def __init__(
        self,
        model: ClusterModel,
        speed: float = 60.0,
        step_seconds: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.speed = speed
        self.step_seconds = step_seconds
        self._clock = clock
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[], object]] = []

    @contextmanager
    def locked(self) -> Iterator[ClusterModel]:
        """The model, held exclusively for the duration of the block."""
        with self._lock:
            yield self.model

    @property
    def now(self) -> float:
        """The model's time (simulated seconds since its start)."""
        with self._lock:
            return self.model.now

    def on_change(self, listener: Callable[[], object]) -> None:
        """Call `listener` after every change made through `change` or `advance`."""
        self._listeners.append(listener)

    def change(self, action: Callable[[ClusterModel], str]) -> str:
        """Apply `action` to the model under the lock, then tell the listeners; returns what it said."""
        with self._lock:
            result = action(self.model)
        self.changed()
        return result

    def advance(self, seconds: float) -> None:
        """Advance the model by `seconds` now (in this thread), then tell the listeners."""
        with self._lock:
            self.model.advance(seconds)
        self.changed()

    def changed(self) -> None:
        """Tell the listeners that the model changed."""
        for listener in self._listeners:
            try:
                listener()
            except Exception:  # a broken listener must not undo the change; the log says what failed
                log.exception("listener after a model change failed")

    def start(self) -> None:
        """Start moving the clock (a no-op at speed 0)."""
        if self.speed <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="cluster-model", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """False only when the clock thread was started and has died."""
        return self._thread is None or self._thread.is_alive() or self._stop.is_set()

    def _run(self) -> None:
        last = self._clock()
        while not self._stop.wait(self.step_seconds):
            now = self._clock()
            elapsed = min(now - last, MAX_CATCH_UP * self.step_seconds)
            last = now
            if elapsed > 0:
                with self._lock:
                    self.model.advance(elapsed * self.speed)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the clock thread after its current step."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


class Periodic:
    """Calls `action` now and then every `interval_seconds` on a daemon thread, until stopped.

    `action` is also what a listener calls after a change; callers serialise the two (the cluster server
    holds one lock per reader), so a read that began before a change never lands after the one after it.
    """

    def __init__(self, name: str, interval_seconds: float, action: Callable[[], object]) -> None:
        self._name = name
        self._interval = interval_seconds
        self._action = action
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._action()
            except Exception:  # keep refreshing; the reader's own health check reports stale data
                log.exception("%s failed", self._name)

    def alive(self) -> bool:
        """False only when the thread was started and has died."""
        return self._thread is None or self._thread.is_alive() or self._stop.is_set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the current call."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
