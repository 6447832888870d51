"""Calls collectors on a background thread, each under its own deadline, one handoff per collection.

Rules: the calls of one collection run one after another on one runner thread, and the caller is woken
once, when they are all done (a thread handoff per collector would cost a context switch each). A call
that overruns its deadline is given up: it keeps its thread, the calls after it go on on another runner,
and until it returns that collector fails at once ("previous run has not returned yet"). So threads never
pile up behind a hung driver: at most one per hung collector, plus one. Deadlines are wall-clock
(`time.monotonic`); the `clock` given only stamps what `hung()` reports.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence

from foundation.collector import Collector
from foundation.errors import CollectorTimeoutError
from foundation.exposition import MetricFamily

Outcome = list[MetricFamily] | BaseException
Timed = tuple[Outcome, float]  # what a call gave, and how many seconds it took
_STILL_HUNG = "previous run has not returned yet (hung call)"


class _Batch:
    """The calls of one collection and how far the runner got."""

    __slots__ = ("abandoned", "calls", "finished", "index", "outcomes", "stamped", "started")

    def __init__(self, calls: list[Collector], clock: Callable[[], float]) -> None:
        self.calls = calls
        self.outcomes: list[Timed] = []
        self.index = 0  # the call in progress
        self.started = time.monotonic()  # when it began
        self.stamped = clock()  # the same moment on the caller's clock
        self.abandoned = False
        self.finished = False


class DeadlineRunner:
    """Runs collectors' `collect` under deadlines (one caller at a time: the registry's collection lock)."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._clock = clock
        self._cond = threading.Condition()  # guards what follows; never held while a collector runs
        self._idle: list[queue.SimpleQueue[_Batch | None]] = []
        self._threads = 0
        self._hung: dict[str, float] = {}  # collector -> when its hung call began (caller's clock)
        self._batch: _Batch | None = None
        self._closed = False

    def run(self, collectors: Sequence[Collector], deadlines: dict[str, float]) -> dict[str, Timed]:
        """Each collector's families (or the exception it raised, or a CollectorTimeoutError) and duration."""
        results: dict[str, Timed] = {}
        todo: list[Collector] = []
        with self._cond:
            for collector in collectors:
                if collector.name in self._hung:
                    results[collector.name] = (CollectorTimeoutError(_STILL_HUNG), 0.0)
                else:
                    todo.append(collector)
        while todo:
            batch = self._start(todo)
            hung = self._wait(batch, deadlines)
            for collector, outcome in zip(batch.calls, batch.outcomes, strict=False):
                results[collector.name] = outcome
            if hung is None:
                break
            timeout = deadlines[hung.name]
            results[hung.name] = (CollectorTimeoutError(f"no answer within {timeout:g} s"), timeout)
            todo = batch.calls[len(batch.outcomes) + 1 :]
        return results

    def hung(self) -> dict[str, float]:
        """Collectors whose call was given up and has not returned, with when it began (caller's clock)."""
        with self._cond:
            return dict(self._hung)

    def running(self) -> tuple[str, float] | None:
        """The collector whose call is in progress now and when it began (caller's clock), or None."""
        with self._cond:
            batch = self._batch
            if batch is None or batch.finished or batch.abandoned:
                return None
            return batch.calls[batch.index].name, batch.stamped

    def close(self) -> None:
        """End the idle threads now and the busy ones when their call returns."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)

    def _start(self, calls: list[Collector]) -> _Batch:
        with self._cond:
            inbox = self._idle.pop() if self._idle else None
            batch = self._batch = _Batch(calls, self._clock)
        if inbox is None:
            inbox = queue.SimpleQueue()
            self._threads += 1
            name = f"collect-{self._name}-{self._threads}"
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put(batch)
        return batch

    def _wait(self, batch: _Batch, deadlines: dict[str, float]) -> Collector | None:
        """Wait until the batch is done (None) or its current call overran its deadline (that collector)."""
        later = [deadlines[c.name] for c in batch.calls]
        for i in range(len(later) - 2, -1, -1):  # the soonest any call from i on can be overdue
            later[i] = min(later[i], later[i + 1])
        with self._cond:
            while not batch.finished:
                now = time.monotonic()
                current = batch.calls[batch.index]
                overdue_at = batch.started + deadlines[current.name]
                if now >= overdue_at:
                    batch.abandoned = True
                    self._hung[current.name] = batch.stamped
                    return current
                wake = overdue_at
                if batch.index + 1 < len(later):
                    wake = min(wake, now + later[batch.index + 1])
                self._cond.wait(wake - now)
        return None

    def _serve(self, inbox: queue.SimpleQueue[_Batch | None]) -> None:
        while (batch := inbox.get()) is not None:
            last = len(batch.calls) - 1
            for i, collector in enumerate(batch.calls):
                try:
                    outcome: Outcome = collector.collect()
                except BaseException as exc:  # handed to the caller, which logs it
                    outcome = exc
                with self._cond:  # one step, so the caller never sees a finished call as the current one
                    if batch.abandoned:  # the caller gave up on this call; it has returned now
                        self._hung.pop(collector.name, None)
                        break
                    now = time.monotonic()
                    batch.outcomes.append((outcome, now - batch.started))
                    if i < last:
                        batch.index, batch.started, batch.stamped = i + 1, now, self._clock()
                    else:
                        batch.finished = True
                        self._cond.notify_all()
            with self._cond:
                if self._closed:
                    return
                self._idle.append(inbox)
