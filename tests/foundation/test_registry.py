"""Registry: self metrics, failure isolation and deadlines."""

from __future__ import annotations

import threading
import time

from foundation.exposition import MetricFamily, render
from foundation.registry import Registry
from tests.helpers import FAMILY_SPEC, samples_of


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
