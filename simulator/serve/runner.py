"""Runs a ClusterModel in the background at `speed` simulated seconds per wall second, behind one lock.

Every read and change of the model goes through `locked()`. A background loop (foundation.loop) wakes
every `step_seconds` of wall time and advances the model by the wall time elapsed times `speed`; when the
model cannot keep up, simulated time runs slower (at most `MAX_CATCH_UP` steps' worth per wake-up), never
in bursts. Listeners registered with `on_change` run after a control, a fault or a manual `advance`
(outside the lock), so the exporters' caches show the change at once. With `Stops` set, a manual advance
goes in pieces that end at each stop, where the stops act (after the listeners, outside the lock): what
must happen at its own simulated time whoever advances the clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from foundation.loop import Loop
from simulator.cluster.model import ClusterModel

log = logging.getLogger(__name__)

MAX_CATCH_UP = 4
_EPS = 1e-9


class Stops(Protocol):
    """Simulated times a manual advance stops at, and what is done there."""

    def next_stop(self, now: float) -> float | None:
        """The next time to stop at, at or after `now` (None: none)."""

    def reached(self, now: float) -> None:
        """The clock is at a stop (called once per stop and advance)."""


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
        self._loop: Loop | None = None
        self._last = clock()
        self._listeners: list[Callable[[], object]] = []
        self._stops: Stops | None = None

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

    def set_stops(self, stops: Stops | None) -> None:
        """Make every manual `advance` stop at the times `stops` names (None: no stops)."""
        self._stops = stops

    def advance(self, seconds: float) -> None:
        """Advance the model by `seconds` now (in this thread), then tell the listeners; with stops, in
        pieces that end at each stop, the listeners told and the stop reached after each piece."""
        if self._stops is None:
            with self._lock:
                self.model.advance(seconds)
            self.changed()
            return
        end = self.now + seconds
        acted = float("nan")  # the time the stops last acted at, within this advance
        while True:
            now = self.now
            stop = self._stops.next_stop(now)
            if stop is not None and stop <= now + _EPS and now != acted:
                self._stops.reached(now)
                acted = now
                continue
            if end - now <= _EPS:
                return
            until = end if stop is None or stop <= now + _EPS else min(stop, end)
            with self._lock:
                self.model.advance(until - self.model.now)
            self.changed()

    def changed(self) -> None:
        """Tell the listeners that the model changed."""
        for listener in self._listeners:
            try:
                listener()
            except Exception:  # a broken listener must not undo the change; the log says what failed
                log.exception("listener after a model change failed")

    def start(self) -> None:
        """Start moving the clock (a no-op at speed 0, or when it runs already)."""
        if self.speed <= 0 or self._loop is not None:
            return
        self._last = self._clock()
        self._loop = Loop("cluster-model", self.step_seconds, self._step, run_at_start=False)
        self._loop.start()

    def alive(self) -> bool:
        """False only when the clock thread was started and has died."""
        return self._loop is None or self._loop.alive()

    def _step(self) -> None:
        now = self._clock()
        elapsed = min(now - self._last, MAX_CATCH_UP * self.step_seconds)
        self._last = now
        if elapsed > 0:
            with self._lock:
                self.model.advance(elapsed * self.speed)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the clock thread after its current step."""
        if self._loop is not None:
            self._loop.stop(timeout)
