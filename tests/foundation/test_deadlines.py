"""DeadlineRunner: one handoff per collection, a hung call given up alone, no thread pile-up."""

from __future__ import annotations

import threading

from foundation.deadlines import DeadlineRunner
from foundation.errors import CollectorTimeoutError
from foundation.exposition import MetricFamily
from tests.foundation.test_registry import Fixed, Hanging
from tests.helpers import wait_for


class Named(Fixed):
    def __init__(self, name: str) -> None:
        self.name = name
        self.threads: list[threading.Thread] = []

    def collect(self) -> list[MetricFamily]:
        self.threads.append(threading.current_thread())
        return super().collect()


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"collect-{name}-")]


def test_one_thread_runs_every_call_of_a_collection() -> None:
    first, second = Named("first"), Named("second")
    runner = DeadlineRunner("one")
    for _ in range(3):
        results = runner.run([first, second], {"first": 5, "second": 5})
        assert [len(results[n][0]) for n in ("first", "second")] == [1, 1]  # type: ignore[arg-type]
    assert len(set(first.threads + second.threads)) == 1
    assert first.threads[0] is not threading.current_thread()
    runner.close()
    assert wait_for(lambda: not _threads("one"))


def test_a_hung_call_is_given_up_alone_and_fails_fast_until_it_returns() -> None:
    before, hanging, after = Named("before"), Hanging(), Named("after")
    deadlines = {"before": 5.0, "hanging": 0.2, "after": 5.0}
    runner = DeadlineRunner("hung")
    results = runner.run([before, hanging, after], deadlines)
    outcome, seconds = results["hanging"]
    assert isinstance(outcome, CollectorTimeoutError) and "no answer within 0.2 s" in str(outcome)
    assert seconds == 0.2
    assert len(results["before"][0]) == 1 and len(results["after"][0]) == 1  # type: ignore[arg-type]
    assert before.threads[0] is not after.threads[0]  # the calls after the hung one moved on
    assert list(runner.hung()) == ["hanging"] and runner.running() is None

    results = runner.run([before, hanging, after], deadlines)  # still hung: no second call behind it
    assert "previous run has not returned yet" in str(results["hanging"][0])
    assert hanging.calls == 1
    assert len(_threads("hung")) == 2  # the hung one and one more, however many collections

    hanging.release.set()
    assert wait_for(lambda: runner.hung() == {})
    results = runner.run([before, hanging, after], deadlines)
    assert results["hanging"][0] == [] and hanging.calls == 2
    runner.close()
    assert wait_for(lambda: not _threads("hung"))


def test_an_exception_is_the_outcome_and_the_thread_lives_on() -> None:
    class Raising(Fixed):
        name = "raising"

        def collect(self) -> list[MetricFamily]:
            raise ValueError("bad sysfs")

    runner = DeadlineRunner("raise")
    for _ in range(2):
        outcome, _ = runner.run([Raising(), Named("ok")], {"raising": 5, "ok": 5})["raising"]
        assert isinstance(outcome, ValueError)
    assert len(_threads("raise")) == 1
    runner.close()
