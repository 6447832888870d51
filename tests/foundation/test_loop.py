"""The background loop: first run now or after one interval, a fixed schedule that does not catch up,
a failing action logged and survived, stop and join, liveness. Waits are on the loop's run count."""

from __future__ import annotations

import logging
import threading

import pytest

from foundation.loop import Loop, next_due


def test_runs_at_once_then_every_interval_until_stopped() -> None:
    calls: list[str] = []
    loop = Loop("test-loop", 0.01, lambda: calls.append(threading.current_thread().name))
    assert loop.alive() and loop.runs == 0  # not started: nothing to report
    loop.start()
    try:
        assert loop.wait_for_runs(3, timeout=30)
        assert loop.alive()
    finally:
        assert loop.stop(timeout=30)
    done = loop.runs
    assert len(calls) == done >= 3 and set(calls) == {"test-loop"}
    assert loop.alive()  # stopped on purpose: not a death
    assert not loop.wait_for_runs(done + 1, timeout=0.2)
    with pytest.raises(RuntimeError, match="already started"):
        loop.start()


def test_the_first_run_can_wait_one_interval() -> None:
    ran = threading.Event()
    hourly = Loop("hourly", 3600, ran.set, run_at_start=False)
    hourly.start()
    assert hourly.stop(timeout=30)
    assert not ran.is_set() and hourly.runs == 0
    at_once = Loop("at-once", 3600, ran.set)
    at_once.start()
    try:
        assert at_once.wait_for_runs(1, timeout=30) and ran.is_set()
    finally:
        at_once.stop(timeout=30)


def test_a_failing_action_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    def action() -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise OSError(f"failure {calls}")

    loop = Loop("flaky", 0.01, action)
    with caplog.at_level(logging.ERROR, logger="foundation.loop"):
        loop.start()
        try:
            assert loop.wait_for_runs(4, timeout=30)
        finally:
            loop.stop(timeout=30)
    assert loop.alive()
    failures = [r for r in caplog.records if r.getMessage() == "flaky failed"]
    assert len(failures) == 2 and failures[0].exc_info is not None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death is the point
def test_a_loop_whose_thread_died_is_not_alive() -> None:
    def action() -> None:
        raise SystemExit(3)  # not an Exception: it ends the thread

    loop = Loop("dies", 0.01, action)
    loop.start()
    assert loop._thread is not None
    loop._thread.join(30)
    assert not loop.alive()
    assert loop.stop(timeout=1)


def test_the_schedule_is_fixed_and_does_not_catch_up() -> None:
    assert next_due(10.0, 5.0, now=12.0) == 15.0  # on time: the next slot, whatever the run took
    assert next_due(10.0, 5.0, now=15.0) == 15.0
    assert next_due(10.0, 5.0, now=47.0) == 47.0  # overran six slots: one run now, not six


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval must be > 0"):
        Loop("bad", 0, lambda: None)
