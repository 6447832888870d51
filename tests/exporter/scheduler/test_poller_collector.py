"""Background polling, caching and freshness: failed or old polls are never served as current."""

from __future__ import annotations

import logging
import threading

import pytest

from exporter.scheduler.collector import SchedulerCollector, SchedulerStatusCollector
from exporter.scheduler.errors import CommandError, NoFreshDataError, ParseError
from exporter.scheduler.poller import SchedulerPoller
from exporter.scheduler.pools import SchedulerSnapshot, summarise
from foundation.exposition import render
from foundation.registry import Registry
from tests.exporter.scheduler.fake_slurm import cluster_state
from tests.helpers import samples_of, wait_for

SNAPSHOT = summarise(cluster_state("gres"))


class Clock:
    """A settable clock for both monotonic and wall time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Script:
    """A read function that returns or raises what the test queued."""

    def __init__(self) -> None:
        self.outcomes: list[SchedulerSnapshot | Exception] = []
        self.calls = 0

    def __call__(self) -> SchedulerSnapshot:
        self.calls += 1
        outcome = self.outcomes.pop(0) if self.outcomes else SNAPSHOT
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def _scrape(poller: SchedulerPoller, clock: Clock, max_age: float = 60) -> str:
    registry = Registry(
        [SchedulerCollector(poller, max_age, clock), SchedulerStatusCollector(poller, max_age, clock)]
    )
    return render(registry.collect())


def _value(text: str, name: str, **labels: str) -> float | None:
    return samples_of(text, name).get(tuple(sorted(labels.items())))


def test_before_the_first_poll_the_scheduler_is_not_up() -> None:
    clock = Clock()
    poller = SchedulerPoller(Script(), 15, clock, clock)
    text = _scrape(poller, clock)
    assert _value(text, "ibpool_scheduler_up") == 0
    assert _value(text, "ibpool_exporter_collector_success", collector="scheduler") == 0
    assert "ibpool_scheduler_poll_timestamp_seconds" not in text
    assert "ibpool_pool_" not in text


def test_a_successful_poll_is_served_with_its_timestamp() -> None:
    clock = Clock()
    poller = SchedulerPoller(Script(), 15, clock, clock)
    assert poller.poll_once().ok
    clock.now += 5
    text = _scrape(poller, clock)
    assert _value(text, "ibpool_scheduler_up") == 1
    assert _value(text, "ibpool_scheduler_poll_timestamp_seconds") == 1000
    assert _value(text, "ibpool_exporter_collector_success", collector="scheduler") == 1
    assert samples_of(text, "ibpool_pool_allocated_gpus") == {
        (("pool", "inference"),): 2,
        (("pool", "training"),): 19,
    }
    assert _value(text, "ibpool_node_state_info", node="node7", state="down") == 1
    assert len(samples_of(text, "ibpool_pool_node_info")) == 8


def test_a_failed_poll_drops_the_pool_series_and_keeps_the_last_timestamp(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    script = Script()
    poller = SchedulerPoller(script, 15, clock, clock)
    poller.poll_once()
    clock.now += 15
    script.outcomes.append(CommandError("sinfo: no answer within 10 s (killed)"))
    with caplog.at_level(logging.WARNING, logger="exporter.scheduler.poller"):
        state = poller.poll_once()
    assert not state.ok and state.snapshot is SNAPSHOT  # kept, but not served
    assert "scheduler poll failed: sinfo: no answer" in caplog.text
    text = _scrape(poller, clock)
    assert _value(text, "ibpool_scheduler_up") == 0
    assert _value(text, "ibpool_scheduler_poll_timestamp_seconds") == 1000
    assert _value(text, "ibpool_exporter_collector_success", collector="scheduler") == 0
    assert _value(text, "ibpool_exporter_collector_success", collector="scheduler_status") == 1
    assert "ibpool_pool_" not in text
    assert "ibpool_node_state_info" not in text
    clock.now += 15
    assert poller.poll_once().ok
    text = _scrape(poller, clock)
    assert _value(text, "ibpool_scheduler_up") == 1
    assert _value(text, "ibpool_scheduler_poll_timestamp_seconds") == 1030


def test_repeated_identical_failures_log_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    script = Script()
    script.outcomes = [ParseError("x"), ParseError("x"), ParseError("x"), ParseError("y")]
    poller = SchedulerPoller(script, 15, clock, clock)
    with caplog.at_level(logging.INFO, logger="exporter.scheduler.poller"):
        for _ in range(5):
            poller.poll_once()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "scheduler poll failed: x",
        "scheduler poll failed: y",
        "scheduler poll succeeded again after: y",
    ]


def test_an_unexpected_exception_is_a_failed_poll_not_a_crash() -> None:
    clock = Clock()
    script = Script()
    script.outcomes.append(KeyError("surprise"))
    poller = SchedulerPoller(script, 15, clock, clock)
    state = poller.poll_once()
    assert state.ok is False and state.error is not None and "KeyError" in state.error


def test_data_older_than_max_age_are_not_served() -> None:
    clock = Clock()
    poller = SchedulerPoller(Script(), 15, clock, clock)
    poller.poll_once()
    clock.now += 61
    text = _scrape(poller, clock, max_age=60)
    assert _value(text, "ibpool_scheduler_up") == 0
    assert "ibpool_pool_" not in text
    with pytest.raises(NoFreshDataError, match=r"61\.0 s old"):
        SchedulerCollector(poller, 60, clock).collect()


def test_the_thread_polls_at_the_interval_and_stops() -> None:
    script = Script()
    polled = threading.Event()
    original = script.__call__

    def read() -> SchedulerSnapshot:
        if script.calls >= 2:
            polled.set()
        return original()

    poller = SchedulerPoller(read, 0.01)
    poller.start()
    try:
        assert polled.wait(10)
        assert wait_for(lambda: poller.state().ok is True, 10)
    finally:
        poller.stop(timeout=10)
    calls = script.calls
    assert not wait_for(lambda: script.calls > calls, 0.1)
    with pytest.raises(RuntimeError):
        poller.start()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death is the point
def test_a_dead_poll_thread_is_a_health_problem() -> None:
    def read() -> SchedulerSnapshot:
        raise SystemExit(1)  # not an Exception: nothing catches it, the thread ends

    poller = SchedulerPoller(read, 0.01)
    assert poller.health_problem() is None
    poller.start()
    assert wait_for(lambda: poller.health_problem() is not None, 10)
    assert poller.health_problem() == "scheduler poll thread has stopped"
    poller.stop(timeout=10)
