"""Registry: self metrics, failure isolation and deadlines."""

from __future__ import annotations

import threading
import time

from foundation.exposition import MetricFamily, render
from foundation.registry import Registry
from tests.helpers import FAMILY_SPEC, samples_of, wait_for


class Fixed:
    """A collector returning one sample."""

    name = "fixed"

    def collect(self) -> list[MetricFamily]:
        family = MetricFamily(FAMILY_SPEC)
        family.add(("x",), 1)
        return [family]

    def close(self) -> None:
        pass


class Broken:
    """A collector that always fails."""

    name = "broken"

    def collect(self) -> list[MetricFamily]:
        raise OSError("device vanished")

    def close(self) -> None:
        pass


class Hanging:
    """A collector whose call blocks until released, like a hung driver."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def collect(self) -> list[MetricFamily]:
        self.calls += 1
        self.release.wait(30)
        return []

    def close(self) -> None:
        self.release.set()


def test_a_failing_collector_does_not_hide_the_others() -> None:
    registry = Registry([Fixed(), Broken()])
    text = render(registry.collect())
    values = samples_of(text, "ibpool_exporter_collector_success")
    assert values == {(("collector", "broken"),): 0.0, (("collector", "fixed"),): 1.0}
    assert samples_of(text, "ibpool_test_family") == {(("name", "x"),): 1.0}
    assert "device vanished" in (registry.status()["broken"].error or "")
    assert samples_of(text, "ibpool_build_info")


def test_a_hung_collector_times_out_fails_fast_while_hung_and_recovers() -> None:
    hanging = Hanging()
    registry = Registry([hanging, Fixed()], deadlines={"hanging": 0.2})
    text = render(registry.collect())
    assert samples_of(text, "ibpool_exporter_collector_success")[(("collector", "hanging"),)] == 0.0
    assert samples_of(text, "ibpool_test_family")  # the healthy collector still reported
    registry.collect()  # still hung: fails without a second call piling up
    assert hanging.calls == 1
    assert "previous run" in (registry.status()["hanging"].error or "")
    hanging.release.set()
    for _ in range(500):  # the worker thread needs a moment to hand back the released call
        registry.collect()
        if registry.status()["hanging"].success:
            break
        time.sleep(0.01)
    assert registry.status()["hanging"].success
    registry.close()


class Snapshot:
    """A collector that only hands out what something else sampled."""

    name = "snapshot"
    serves_snapshot = True

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def collect(self) -> list[MetricFamily]:
        self.threads.append(threading.current_thread())
        return []

    def close(self) -> None:
        pass


class Where(Snapshot):
    """The same, without the snapshot promise: it runs on its worker."""

    name = "where"
    serves_snapshot = False


def test_every_collector_gets_a_deadline_even_without_one_given() -> None:
    hanging = Hanging()
    registry = Registry([hanging, Fixed()], default_deadline_seconds=0.2)
    text = render(registry.collect())
    assert samples_of(text, "ibpool_exporter_collector_success")[(("collector", "hanging"),)] == 0.0
    assert "no answer within 0.2 s" in (registry.status()["hanging"].error or "")
    assert registry.deadline("fixed") == 0.2
    registry.close()


def test_a_snapshot_collector_runs_inline_and_the_others_on_their_worker() -> None:
    snapshot, where = Snapshot(), Where()
    registry = Registry([snapshot, where])
    registry.collect()
    registry.collect()
    assert snapshot.threads == [threading.current_thread()] * 2
    assert len(where.threads) == 2 and where.threads[0] is not threading.current_thread()
    assert registry.status()["snapshot"].success and registry.status()["where"].success
    registry.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_state_shows_a_call_past_its_deadline_without_waiting_for_it() -> None:
    clock = Clock()
    hanging = Hanging()
    registry = Registry([hanging, Fixed()], deadlines={"hanging": 30}, clock=clock)
    collecting = threading.Thread(target=registry.collect, daemon=True)
    collecting.start()
    assert wait_for(lambda: hanging.calls == 1)
    state = registry.state()  # the collection holds its lock; state() does not need it
    assert state.last_collection_age is None and state.collecting_for == 0 and state.stuck == {}
    assert registry.refresh() is False  # one is running: no second one behind it
    clock.now += 31
    state = registry.state()
    assert state.stuck == {"hanging": (31, 30)}
    assert state.collecting_for == 31 and state.collection_deadline == 30 + 5 + 1
    hanging.release.set()
    collecting.join(30)
    assert not collecting.is_alive()
    state = registry.state()
    assert state.stuck == {} and state.collecting_for is None and state.last_collection_age == 0
    registry.close()
