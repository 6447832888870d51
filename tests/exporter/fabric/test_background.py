"""Background sweeps, the collectors' view of them (never old data as fresh), and the health verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.collector import FabricCollector, FabricStatusCollector
from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.errors import NoSweepYetError, StaleFabricDataError
from exporter.fabric.families import build_families
from exporter.fabric.model import SweepResult
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandResult
from foundation.exposition import MetricFamily, render
from foundation.health import HealthCheck
from foundation.registry import Registry
from tests.exporter.fabric.helpers import LEAF2, SPINE1, ScriptedRunner, data, ok
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
    """A sweeper over scripted output whose discovery (or every command) can be made to fail."""

    def __init__(self, tmp_path: Path, clock: Clock | None = None) -> None:
        self.discovery_fails = False
        self.everything_fails = False
        self.runner = ScriptedRunner([self._discovery])
        self.sweeper = Sweeper(
            DiagCommands(DiagOptions()), self.runner, SweepSettings(), tmp_path, clock=clock or Clock()
        )

    def _discovery(self, argv: tuple[str, ...]) -> CommandResult | None:
        if self.everything_fails or (self.discovery_fails and Path(argv[0]).name == "ibnetdiscover"):
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


def _collect(registry: Registry) -> str:
    return render(registry.collect())


def test_old_topology_is_aged_and_past_the_bound_no_longer_served(tmp_path: Path) -> None:
    clock = Clock()
    fabric = Fabric(tmp_path, clock)
    background = BackgroundSweeper(fabric.sweeper, 60, _build, 90, clock=clock)
    registry = Registry([FabricCollector(background), FabricStatusCollector(background)])
    health = HealthCheck(registry, 90, [background.health_problem])
    background.run_once()
    text = _collect(registry)
    success = "ibpool_exporter_collector_success"
    assert samples_of(text, success) == {(("collector", "fabric"),): 1, (("collector", "fabric_status"),): 1}
    assert samples_of(text, "ibpool_fabric_topology_age_seconds") == {(): 0}
    assert len(samples_of(text, "ibpool_fabric_link_info")) == 8

    fabric.everything_fails = True
    clock.now += 30
    background.run_once()  # discovery fails: the topology of 30 s ago is used again, with its age
    text = _collect(registry)
    assert samples_of(text, "ibpool_fabric_topology_age_seconds") == {(): 30}
    assert samples_of(text, "ibpool_fabric_sweep_timestamp_seconds") == {(): clock.now}
    assert len(samples_of(text, "ibpool_fabric_link_info")) == 8
    assert set(samples_of(text, "ibpool_fabric_switch_up").values()) == {0}
    assert "ibpool_fabric_port_counters_age_seconds" not in text  # nothing read, nothing aged
    assert samples_of(text, "ibpool_fabric_sweeps_total") == {
        (("result", "complete"),): 2,
        (("result", "failed"),): 0,
    }

    clock.now += 61
    background.run_once()
    text = _collect(registry)  # 91 s: past the bound
    assert samples_of(text, success)[(("collector", "fabric"),)] == 0
    assert samples_of(text, "ibpool_fabric_topology_age_seconds") == {(): 91}
    assert "ibpool_fabric_link_info" not in text and "ibpool_fabric_switch_up" not in text
    with pytest.raises(StaleFabricDataError, match=r"fabric topology is 91 s old \(max 90 s\)"):
        FabricCollector(background).collect()
    report = health.check()
    assert not report.healthy and any("fabric topology is 91 s old" in r for r in report.reasons)

    fabric.everything_fails = False
    clock.now += 15
    background.run_once()  # discovery works again: fresh topology, served again
    text = _collect(registry)
    assert samples_of(text, success)[(("collector", "fabric"),)] == 1
    assert samples_of(text, "ibpool_fabric_topology_age_seconds") == {(): 0}
    assert len(samples_of(text, "ibpool_fabric_link_info")) == 8
    fabric.sweeper.close()


def test_counter_ages_grow_until_the_next_sweep(tmp_path: Path) -> None:
    clock = Clock()
    fabric = Fabric(tmp_path, clock)
    background = BackgroundSweeper(fabric.sweeper, 60, _build, 300, clock=clock)
    background.run_once()
    collector = FabricCollector(background)
    ages = samples_of(render(collector.collect()), "ibpool_fabric_port_counters_age_seconds")
    assert len(ages) == 18 and set(ages.values()) == {0}
    clock.now += 20
    ages = samples_of(render(collector.collect()), "ibpool_fabric_port_counters_age_seconds")
    assert set(ages.values()) == {20}
    clock.now += 281  # the sweep itself is past the bound
    with pytest.raises(StaleFabricDataError, match="last complete fabric sweep is 301 s old"):
        collector.collect()
    fabric.sweeper.close()


def test_a_garbage_line_never_becomes_a_link_and_is_counted(tmp_path: Path) -> None:
    def garbage(argv: tuple[str, ...]) -> CommandResult | None:
        if Path(argv[0]).name != "ibnetdiscover":
            return None
        Path(argv[argv.index("--cache") + 1]).write_text("cache")
        text = data("ibnetdiscover.txt").replace(
            '"S-0000000000200000"[2]', '"S-0000000000200000"[99999999999]'
        )
        return ok(argv, text)

    runner = ScriptedRunner([garbage])
    sweeper = Sweeper(DiagCommands(DiagOptions()), runner, SweepSettings(), tmp_path)
    background = BackgroundSweeper(sweeper, 60, _build, 300)
    background.run_once()
    text = render(Registry([FabricCollector(background), FabricStatusCollector(background)]).collect())
    links = samples_of(text, "ibpool_fabric_link_info")
    assert all(dict(key)["remote_port"] in {"1", "2", "3", "4", "5", "6"} for key in links)
    # the cable is still known, correctly, from spine1's line for its port 2
    leaf2_3 = [dict(key) for key in links if dict(key)["node_guid"] == LEAF2 and dict(key)["port"] == "3"]
    assert [(link["remote_guid"], link["remote_port"]) for link in leaf2_3] == [(SPINE1, "2")]
    assert len(links) == 8
    assert samples_of(text, "ibpool_fabric_skipped_lines_total")[(("program", "ibnetdiscover"),)] == 1
    assert samples_of(text, "ibpool_fabric_skipped_lines_total")[(("program", "perfquery"),)] == 0
    sweeper.close()
