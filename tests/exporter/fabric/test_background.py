"""Background sweeps, the collector's view of them, and the health verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.collector import FabricCollector
from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.errors import NoSweepYetError
from exporter.fabric.families import build_families
from exporter.fabric.model import SweepResult
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandResult
from foundation.exposition import MetricFamily, render
from foundation.health import HealthCheck
from foundation.registry import Registry
from tests.exporter.fabric.helpers import ScriptedRunner, ok
from tests.helpers import samples_of


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _build(result: SweepResult) -> list[MetricFamily]:
    return build_families(result, NameMap())


class Fabric:
    """A sweeper over scripted output whose discovery can be made to fail."""

    def __init__(self, tmp_path: Path) -> None:
        self.discovery_fails = False
        self.runner = ScriptedRunner([self._discovery])
        self.sweeper = Sweeper(DiagCommands(DiagOptions()), self.runner, SweepSettings(), tmp_path)

    def _discovery(self, argv: tuple[str, ...]) -> CommandResult | None:
        if self.discovery_fails and Path(argv[0]).name == "ibnetdiscover":
            return ok(argv, "", 1, "cannot open umad port\n")
        return None


@pytest.fixture
def fabric(tmp_path: Path) -> Fabric:
    return Fabric(tmp_path)


def test_collector_before_and_after_the_first_sweep(fabric: Fabric) -> None:
    background = BackgroundSweeper(fabric.sweeper, 60, _build, 300)
    registry = Registry([FabricCollector(background)])
    text = render(registry.collect())
    assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "fabric"),): 0}
    assert "ibpool_fabric_" not in text
    with pytest.raises(NoSweepYetError):
        FabricCollector(background).collect()
    assert background.run_once() is not None
    text = render(registry.collect())
    assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "fabric"),): 1}
    assert len(samples_of(text, "ibpool_fabric_switch_up")) == 3
    fabric.sweeper.close()


def test_scrapes_do_not_run_diagnostics(fabric: Fabric) -> None:
    background = BackgroundSweeper(fabric.sweeper, 60, _build, 300)
    background.run_once()
    calls = len(fabric.runner.calls)
    collector = FabricCollector(background)
    for _ in range(5):
        collector.collect()
    assert len(fabric.runner.calls) == calls
    fabric.sweeper.close()


def test_a_failed_sweep_keeps_the_last_complete_one(fabric: Fabric) -> None:
    # Without a previous topology a failed discovery fails the sweep; with one it is reused (see test_sweep).
    first = BackgroundSweeper(fabric.sweeper, 60, _build, 300)
    fabric.discovery_fails = True
    assert first.run_once() is None
    assert first.latest is None
    reason = first.health_problem()
    assert reason is not None and "no complete fabric sweep yet" in reason and "DiscoveryError" in reason
    fabric.discovery_fails = False
    published = first.run_once()
    assert published is not None and first.health_problem() is None
    fabric.discovery_fails = True
    second = first.run_once()
    assert second is not None and second.result.topology is published.result.topology
    problem = first.health_problem()
    assert problem is not None and "discovery" in problem
    fabric.sweeper.close()


def test_health_turns_unhealthy_when_the_last_sweep_is_too_old(fabric: Fabric) -> None:
    clock = Clock()
    background = BackgroundSweeper(fabric.sweeper, 60, _build, 90, clock=clock)
    background.run_once()
    registry = Registry([FabricCollector(background)])
    health = HealthCheck(registry, 90, [background.health_problem])
    registry.collect()  # health judges the last collection; it never runs one itself
    assert health.check().healthy
    clock.now += 91
    report = health.check()
    assert not report.healthy and "91 s old" in report.reasons[0]
    fabric.sweeper.close()


def test_thread_sweeps_at_the_interval_and_stops(fabric: Fabric) -> None:
    background = BackgroundSweeper(fabric.sweeper, 0.05, _build, 300)
    background.start()
    try:
        assert background.wait_for_sweeps(3, timeout=30)
    finally:
        background.stop(timeout=30)
    assert background.latest is not None
    assert background.health_problem() is None
    fabric.sweeper.close()
