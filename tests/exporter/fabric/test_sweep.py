"""A sweep over scripted (captured) diagnostics: what is read, what counts as up, failures, memory."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.errors import DiscoveryError
from exporter.fabric.model import SweepResult
from exporter.fabric.perfquery import parse_perfquery
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandResult
from tests.exporter.fabric.helpers import (
    LEAF1,
    LEAF2,
    NODE1,
    SPINE1,
    Handler,
    ScriptedRunner,
    data,
    ok,
    perfquery_lid,
    vl_values,
)


class Clock:
    """A settable wall clock."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def sweep(tmp_path: Path, handlers: list[Handler] | None = None, **settings: object) -> SweepResult:
    sweeper = Sweeper(
        DiagCommands(DiagOptions()),
        ScriptedRunner(handlers or []),
        SweepSettings(**settings),  # type: ignore[arg-type]
        tmp_path,
    )
    try:
        return sweeper.sweep()
    finally:
        sweeper.close()


def test_every_switch_port_is_read(tmp_path: Path) -> None:
    result = sweep(tmp_path, [vl_values({(3, 3, 3): 42})])
    assert set(result.readings) == {LEAF1, LEAF2, SPINE1}
    assert all(r.up and not r.errors for r in result.readings.values())
    leaf1 = result.readings[LEAF1]
    assert sorted(leaf1.ports) == [1, 2, 3, 4, 5, 6]  # enhanced port 0 is not a cabled port
    assert all(leaf1.port_complete(p) for p in range(1, 7))
    assert leaf1.ports[1].counters["symbol_error"] == 7
    port2 = leaf1.ports[2]
    assert port2.counters["port_xmit_data"] == 123456789228 and "port_xmit_data" in port2.wide
    assert port2.counters["port_xmit_wait"] == 4294967295 and "port_xmit_wait" not in port2.wide
    assert leaf1.ports[3].vl_wait[3] == 42
    assert result.states[(LEAF1, 4)].state_id == 1
    assert result.problems == () and result.skipped_lines == {}
    assert list(tmp_path.iterdir()) == []  # the discovery cache is removed


def test_one_process_per_switch_and_batched_vl_reads(tmp_path: Path) -> None:
    runner = ScriptedRunner()
    sweeper = Sweeper(DiagCommands(DiagOptions()), runner, SweepSettings(concurrency=2), tmp_path)
    sweeper.sweep()
    sweeper.close()
    perfquery = [c for c in runner.calls if Path(c[0]).name == "perfquery"]
    assert len(perfquery) == 2 * 3  # basic and extended loop per switch
    helpers = [c for c in runner.calls if "pma_helper.py" in " ".join(c)]
    assert len(helpers) == 2  # three switches split over `concurrency` helper processes
    targets = sorted(a for c in helpers for a in c if a[:1].isdigit() and ":" in a)
    assert targets == ["2:1-6", "3:1-6", "4:1-6"]


def test_a_switch_that_fails_marks_only_itself(tmp_path: Path) -> None:
    def leaf2_fails(argv: tuple[str, ...]) -> CommandResult | None:
        if perfquery_lid(argv) == 4:
            return ok(argv, "", 255, "perfquery: iberror: failed: classportinfo query\n")
        return None

    result = sweep(tmp_path, [leaf2_fails])
    leaf2 = result.readings[LEAF2]
    assert not leaf2.up
    assert leaf2.errors == ("perfquery: exit 255: perfquery: iberror: failed: classportinfo query",) * 2
    assert not any(leaf2.port_complete(p) for p in range(1, 7))
    assert result.readings[LEAF1].up and result.readings[SPINE1].up


def test_a_timeout_or_a_missing_port_makes_the_switch_down(tmp_path: Path) -> None:
    def spine_times_out(argv: tuple[str, ...]) -> CommandResult | None:
        if perfquery_lid(argv) == 2 and "-x" in argv:
            return CommandResult(argv, -9, "", "", 1.0, timed_out=True)
        return None

    def leaf1_port5_missing(argv: tuple[str, ...]) -> CommandResult | None:
        if perfquery_lid(argv) == 3 and "-x" not in argv:
            blocks = data("perfquery_switch_basic.txt").split("# Port counters:")
            return ok(argv, "# Port counters:".join(b for i, b in enumerate(blocks) if i != 6), 255)
        return None

    result = sweep(tmp_path, [spine_times_out, leaf1_port5_missing])
    spine = result.readings[SPINE1]
    assert not spine.up and "no answer within" in spine.errors[0]
    leaf1 = result.readings[LEAF1]
    assert not leaf1.up
    assert [p for p in range(1, 7) if leaf1.port_complete(p)] == [1, 2, 3, 4, 6]
    assert result.readings[LEAF2].up


def test_garbled_output_is_counted_per_program(tmp_path: Path) -> None:
    def garbled(argv: tuple[str, ...]) -> CommandResult | None:
        if perfquery_lid(argv) == 2 and "-x" not in argv:
            return ok(argv, data("perfquery_switch_basic.txt").replace("Lid 3", "Lid 2") + "%%% junk\n")
        if Path(argv[0]).name == "iblinkinfo":
            return ok(argv, data("iblinkinfo.txt") + "junk\n")
        return None

    result = sweep(tmp_path, [garbled])
    assert result.skipped_lines == {"perfquery": 1, "iblinkinfo": 1}
    assert result.readings[SPINE1].up


def test_no_lid_means_not_queried_and_down(tmp_path: Path) -> None:
    def no_lid(argv: tuple[str, ...]) -> CommandResult | None:
        if Path(argv[0]).name == "ibnetdiscover":
            return ok(
                argv, data("ibnetdiscover.txt").replace("base port 0 lid 4 lmc", "base port 0 lid 0 lmc")
            )
        return None

    runner = ScriptedRunner([no_lid])
    sweeper = Sweeper(DiagCommands(DiagOptions()), runner, SweepSettings(port_states=False), tmp_path)
    result = sweeper.sweep()
    sweeper.close()
    assert not result.readings[LEAF2].up
    assert "no LID" in result.readings[LEAF2].errors[0]
    assert not any(perfquery_lid(c) == 0 for c in runner.calls)
    assert result.states == {}


def test_discovery_failure_reuses_the_last_topology(tmp_path: Path) -> None:
    failing = False

    def discovery(argv: tuple[str, ...]) -> CommandResult | None:
        if failing and Path(argv[0]).name == "ibnetdiscover":
            return ok(argv, "", 1, "ibnetdiscover: iberror: failed: discover failed\n")
        return None

    sweeper = Sweeper(DiagCommands(DiagOptions()), ScriptedRunner([discovery]), SweepSettings(), tmp_path)
    first = sweeper.sweep()
    failing = True
    second = sweeper.sweep()
    sweeper.close()
    assert second.topology is first.topology
    assert second.states == {}
    assert all(r.up for r in second.readings.values())
    assert any("discovery" in p for p in second.problems)


def test_discovery_failure_without_any_topology_raises(tmp_path: Path) -> None:
    def discovery(argv: tuple[str, ...]) -> CommandResult | None:
        return ok(argv, "", 1, "no umad\n") if Path(argv[0]).name == "ibnetdiscover" else None

    with pytest.raises(DiscoveryError, match="found no nodes"):
        sweep(tmp_path, [discovery])


def test_a_vanished_switch_is_remembered_then_forgotten(tmp_path: Path) -> None:
    clock = Clock()
    gone = False
    leaf2_section = data("ibnetdiscover.txt").split("vendid=0x0")[1]

    def discovery(argv: tuple[str, ...]) -> CommandResult | None:
        if gone and Path(argv[0]).name == "ibnetdiscover":
            return ok(argv, data("ibnetdiscover.txt").replace(leaf2_section, "\n"))
        return None

    settings = SweepSettings(port_states=False, forget_after_seconds=600)
    sweeper = Sweeper(DiagCommands(DiagOptions()), ScriptedRunner([discovery]), settings, tmp_path, clock)
    assert sweeper.sweep().vanished == {}
    gone = True
    clock.now += 300
    result = sweeper.sweep()
    assert list(result.vanished) == [LEAF2] and result.vanished[LEAF2].desc == "leaf2"
    assert LEAF2 not in result.readings
    clock.now += 400
    assert sweeper.sweep().vanished == {}
    sweeper.close()


def test_hca_ports_are_read_one_port_per_process(tmp_path: Path) -> None:
    runner = ScriptedRunner([vl_values({(1, 1, 0): 5})])
    sweeper = Sweeper(DiagCommands(DiagOptions()), runner, SweepSettings(hca_ports=True), tmp_path)
    result = sweeper.sweep()
    sweeper.close()
    node1 = result.readings[NODE1]
    assert node1.up and node1.port_complete(1)
    extended_port1 = parse_perfquery(data("perfquery_switch_extended.txt"))[0][1]  # the scripted stand-in
    assert node1.ports[1].counters["port_xmit_data"] == extended_port1.counters["port_xmit_data"]
    assert "port_xmit_data" in node1.ports[1].wide
    assert node1.ports[1].vl_wait[0] == 5
    per_port = [c for c in runner.calls if Path(c[0]).name == "perfquery" and "-l" not in c]
    assert len(per_port) == 4 * 2  # basic and extended for each of the 4 HCA ports
    assert len(result.readings) == 3 + 4


def test_vl_modes(tmp_path: Path) -> None:
    off = sweep(tmp_path, vl_counters="off")
    assert all(r.up and r.expected == {"basic", "extended"} for r in off.readings.values())
    runner = ScriptedRunner([vl_values({})])
    settings = SweepSettings(vl_counters="perfquery")
    sweeper = Sweeper(DiagCommands(DiagOptions()), runner, settings, tmp_path)
    result = sweeper.sweep()
    sweeper.close()
    assert all(r.up for r in result.readings.values())
    assert len([c for c in runner.calls if "--vlxmitcounters" in c]) == 3 * 6


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    running = 0
    peak = 0
    lock = threading.Lock()

    def slow(argv: tuple[str, ...]) -> CommandResult | None:
        nonlocal running, peak
        if Path(argv[0]).name != "perfquery":
            return None
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return None

    result = sweep(tmp_path, [slow], concurrency=2, vl_counters="perfquery")
    assert all(r.up for r in result.readings.values())
    assert peak == 2
