"""HealthCheck: answers from the registry's state at once, however the collectors behave."""

from __future__ import annotations

import threading

from foundation.exposition import MetricFamily
from foundation.health import HealthCheck, HealthReport
from foundation.registry import Registry
from tests.foundation.test_registry import Broken, Clock, Fixed, Hanging
from tests.helpers import wait_for


def check_unblocked(health: HealthCheck) -> HealthReport:
    """`health.check()` on a helper thread; fails (instead of hanging the suite) if it blocks."""
    result: list[HealthReport] = []
    worker = threading.Thread(target=lambda: result.append(health.check()), daemon=True)
    worker.start()
    worker.join(30)
    assert result, "health.check() blocked on a collector"
    return result[0]


def test_health_never_waits_on_a_hung_collection_and_calls_it_stuck_past_the_deadline() -> None:
    clock = Clock()
    hanging = Hanging()
    registry = Registry([hanging, Fixed()], deadlines={"hanging": 30}, clock=clock)
    health = HealthCheck(registry, max_age_seconds=60)
    collecting = threading.Thread(target=registry.collect, daemon=True)
    collecting.start()
    assert wait_for(lambda: hanging.calls == 1)
    report = check_unblocked(health)
    assert not report.healthy and report.reasons == ("no collection has completed yet",)
    clock.now += 31
    report = check_unblocked(health)
    assert any(r.startswith("collector hanging stuck: a call has run 31.0 s") for r in report.reasons)
    assert not any(r.startswith("collection stuck") for r in report.reasons)  # 31 s < 30 + 5 + 1 s
    clock.now += 10  # past the whole collection's deadline (30 + 5 + 1 s) too
    report = check_unblocked(health)
    assert any(r.startswith("collection stuck: running for 41.0 s (deadline 36 s)") for r in report.reasons)
    assert report.detail["collection_running_seconds"] == 41
    hanging.release.set()
    collecting.join(30)
    assert check_unblocked(health).healthy
    registry.close()


def test_stale_data_is_refreshed_in_the_background_and_judged_when_done() -> None:
    clock = Clock()
    broken = Broken()
    registry = Registry([Fixed(), broken], clock=clock)
    health = HealthCheck(registry, max_age_seconds=60)
    report = check_unblocked(health)  # nothing collected yet: says so and starts a collection
    assert report.reasons == ("no collection has completed yet",)
    assert wait_for(lambda: registry.last_collection_age() is not None)
    report = check_unblocked(health)
    assert report.reasons == ("collector broken failing: OSError: device vanished",)
    assert report.detail["last_collection_age_seconds"] == 0
    broken.collect = lambda: []  # type: ignore[method-assign]
    clock.now += 61
    assert not check_unblocked(health).healthy  # answers from the old collection, refreshes behind it
    assert wait_for(lambda: registry.last_collection_age() == 0)
    assert check_unblocked(health).healthy
    registry.close()


def test_a_fresh_collection_is_not_repeated() -> None:
    calls: list[int] = []

    class Counting(Fixed):
        def collect(self) -> list[MetricFamily]:
            calls.append(1)
            return super().collect()

    registry = Registry([Counting()])
    registry.collect()
    health = HealthCheck(registry, max_age_seconds=60)
    for _ in range(5):
        assert check_unblocked(health).healthy
    assert calls == [1]
    registry.close()
