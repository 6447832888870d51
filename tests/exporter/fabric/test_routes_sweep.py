"""Forwarding tables in a sweep (scripted diagnostics): when they are read, what is exported, failures."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from exporter.fabric import families
from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.config import load_config
from exporter.fabric.families import build_families
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandResult
from foundation.errors import ConfigError
from foundation.exposition import render
from foundation.hostlist import compress_hostlist, expand_hostlist
from tests.exporter.fabric.helpers import LEAF1, LEAF2, SPINE1, Handler, ScriptedRunner, data, ok
from tests.helpers import samples_of

ROUTE_INFO = "ibpool_fabric_port_route_info"
HOSTS = {"node1", "node2", "node3", "node4"}


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _sweeper(
    tmp_path: Path, handlers: list[Handler] | None = None, **settings: object
) -> tuple[Sweeper, ScriptedRunner, Clock]:
    runner, clock = ScriptedRunner(handlers or []), Clock()
    chosen = SweepSettings(**{"vl_counters": "off", "vlarb_ports": "off", **settings})  # type: ignore[arg-type]
    return Sweeper(DiagCommands(DiagOptions()), runner, chosen, tmp_path, clock), runner, clock


def _route_reads(runner: ScriptedRunner) -> list[str]:
    reads = [c[-1] for c in runner.calls if Path(c[0]).name == "ibroute"]
    runner.calls.clear()
    return sorted(reads)


def _routes(text: str) -> dict[tuple[str, str], list[str]]:
    out = {}
    for labels, value in samples_of(text, ROUTE_INFO).items():
        got = dict(labels)
        assert value == 1
        out[(got["node_guid"], got["port"])] = expand_hostlist(got.get("destinations", ""))
    return out


def _by_switch(text: str, name: str) -> dict[str, float]:
    return {dict(k)["node_guid"]: v for k, v in samples_of(text, name).items()}


def test_every_switch_port_says_which_hosts_leave_through_it(tmp_path: Path) -> None:
    sweeper, runner, _ = _sweeper(tmp_path)
    result = sweeper.sweep()
    sweeper.close()
    assert _route_reads(runner) == ["2", "3", "4"] and not result.route_errors
    assert [a[1] for a in runner.calls if Path(a[0]).name == "ibroute"] == []
    routes = _routes(render(build_families(result, NameMap())))
    assert len(routes) == 3 * 6  # every port of every switch, 6 ports each
    assert routes[(LEAF1, "1")] == ["node1"] and routes[(LEAF1, "2")] == ["node2"]
    assert routes[(LEAF1, "3")] == ["node3", "node4"] and routes[(LEAF1, "4")] == []
    assert routes[(SPINE1, "1")] == ["node1", "node2"] and routes[(SPINE1, "2")] == ["node3", "node4"]
    assert routes[(LEAF2, "1")] == ["node3"] and routes[(LEAF2, "3")] == ["node1", "node2"]
    for guid in (LEAF1, LEAF2, SPINE1):  # every host leaves each switch through exactly one port
        seen = [h for (g, _), hosts in routes.items() if g == guid for h in hosts]
        assert sorted(seen) == sorted(HOSTS)


def test_the_name_map_names_the_destinations(tmp_path: Path) -> None:
    sweeper, _, _ = _sweeper(tmp_path)
    result = sweeper.sweep()
    sweeper.close()
    names = NameMap({"0x0000000000100000": "gpu-a01 mlx5_0"})  # node1's CA
    routes = _routes(render(build_families(result, names)))
    assert routes[(LEAF1, "1")] == ["gpu-a01"] and routes[(SPINE1, "1")] == ["gpu-a01", "node2"]


def test_host_lists_are_built_once_per_table_not_every_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables are read every few minutes and the families built every sweep: a switch's host lists are
    made again only when its table or the LID -> host map changes."""
    sweeper, _, _ = _sweeper(tmp_path)
    result = sweeper.sweep()
    sweeper.close()
    built: list[int] = []

    def counting(names: object) -> str:
        built.append(1)
        return compress_hostlist(names)  # type: ignore[arg-type]

    monkeypatch.setattr(families, "compress_hostlist", counting)
    first = render(build_families(result, NameMap({"0x0000000000100000": "gpu-x mlx5_0"})))
    made = len(built)
    assert made >= 3 * 6  # every port of the three switches
    assert render(build_families(result, NameMap({"0x0000000000100000": "gpu-x mlx5_0"}))) == first
    assert len(built) == made
    renamed = _routes(render(build_families(result, NameMap())))  # another host map: built again
    assert len(built) > made and renamed[(LEAF1, "1")] == ["node1"]


def test_tables_are_read_every_interval_and_at_once_when_lids_change(tmp_path: Path) -> None:
    moved = (
        data("ibnetdiscover.txt")
        .replace('"node4" lid 7', '"node4" lid 8')
        .replace("lid 7 lmc 0", "lid 8 lmc 0")
    )
    plan = {"topology": data("ibnetdiscover.txt")}

    def discovery(argv: tuple[str, ...]) -> CommandResult | None:
        if Path(argv[0]).name != "ibnetdiscover":
            return None
        Path(argv[argv.index("--cache") + 1]).write_text("cache")
        return ok(argv, plan["topology"])

    sweeper, runner, clock = _sweeper(tmp_path, [discovery], routes_interval_seconds=300.0)
    sweeper.sweep()
    assert _route_reads(runner) == ["2", "3", "4"]
    clock.now += 299.0
    kept = sweeper.sweep()
    assert _route_reads(runner) == [] and set(kept.routes) == {LEAF1, LEAF2, SPINE1}
    assert kept.routes[LEAF1].read_at == 1000.0
    plan["topology"] = moved  # OpenSM gave node4 another LID: its tables are new
    sweeper.sweep()
    assert _route_reads(runner) == ["2", "3", "4"]
    clock.now += 299.0
    sweeper.sweep()
    assert _route_reads(runner) == []
    clock.now += 1.0
    sweeper.sweep()
    assert _route_reads(runner) == ["2", "3", "4"]
    sweeper.close()


def test_an_interval_of_zero_reads_none(tmp_path: Path) -> None:
    sweeper, runner, _ = _sweeper(tmp_path, routes_interval_seconds=0.0)
    result = sweeper.sweep()
    sweeper.close()
    assert _route_reads(runner) == [] and not result.routes
    text = render(build_families(result, NameMap()))
    assert ROUTE_INFO not in text and "routes_scrape_success" not in text and "routes_age" not in text


def _leaf2_routes(answer: CommandResult) -> Handler:
    def handler(argv: tuple[str, ...]) -> CommandResult | None:
        if Path(argv[0]).name == "ibroute" and argv[-1] == "4":
            return CommandResult(argv, answer.returncode, answer.stdout, answer.stderr, 0.0, answer.timed_out)
        return None

    return handler


@pytest.mark.parametrize(
    ("answer", "why", "skipped"),
    [
        (CommandResult((), -9, "", "", 10.0, timed_out=True), "no answer", 0),
        (
            ok((), "ibroute: iberror: failed: dump tables: node info failed: valid addr?\n", 255),
            "exit 255",
            1,
        ),
        (ok((), data("ibroute_leaf2.txt").replace("0x0006 001", "0x0006 0x1")), "6 of the 7", 1),
        (ok((), "".join(data("ibroute_leaf2.txt").splitlines(True)[:6])), "cut short", 0),
    ],
    ids=["timeout", "exit", "garbled", "truncated"],
)
def test_a_failed_read_keeps_the_last_good_table_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: CommandResult, why: str, skipped: int
) -> None:
    sweeper, runner, clock = _sweeper(tmp_path, routes_interval_seconds=60.0)
    background = BackgroundSweeper(sweeper, 60.0, lambda r: build_families(r, NameMap()), 300.0)
    background.run_once()
    good = _routes(render(list(background.latest.families)))  # type: ignore[union-attr]
    runner.handlers.append(_leaf2_routes(answer))
    clock.now += 60.0
    with caplog.at_level(logging.WARNING, logger="exporter.fabric.background"):
        published = background.run_once()
    sweeper.close()
    assert published is not None and background.health_problem() is None  # nothing else failed
    result = published.result
    assert why in result.route_errors[LEAF2] and set(result.route_errors) == {LEAF2}
    assert result.routes[LEAF2].read_at == 1000.0 and result.routes[LEAF1].read_at == 1060.0
    text = render(list(published.families))
    assert _routes(text) == good  # leaf2's last good table is still served
    assert _by_switch(text, "ibpool_fabric_switch_routes_scrape_success") == {LEAF1: 1, LEAF2: 0, SPINE1: 1}
    assert _by_switch(text, "ibpool_fabric_switch_routes_age_seconds") == {LEAF1: 0, LEAF2: 60, SPINE1: 0}
    assert dict(result.skipped_lines).get("ibroute", 0) == skipped
    assert any("forwarding tables of 1 switch(es) unreadable" in r.message and LEAF2 in r.message
               for r in caplog.records)  # fmt: skip


def test_a_switch_without_a_table_is_tried_again_next_sweep(tmp_path: Path) -> None:
    sweeper, runner, clock = _sweeper(tmp_path, [_leaf2_routes(ok((), "", 255))])
    first = sweeper.sweep()
    assert LEAF2 not in first.routes and LEAF2 in first.route_errors
    text = render(build_families(first, NameMap()))
    assert {g for g, _ in _routes(text)} == {LEAF1, SPINE1}
    assert _by_switch(text, "ibpool_fabric_switch_routes_scrape_success")[LEAF2] == 0
    _route_reads(runner)
    runner.handlers.clear()
    clock.now += 15.0
    second = sweeper.sweep()
    sweeper.close()
    assert _route_reads(runner) == ["4"] and LEAF2 in second.routes and not second.route_errors


def test_every_lid_of_a_port_with_an_lmc_is_its_host(tmp_path: Path) -> None:
    lmc = data("ibnetdiscover.txt").replace("# lid 6 lmc 0", "# lid 6 lmc 1")  # node3: LIDs 6 and 7

    def discovery(argv: tuple[str, ...]) -> CommandResult | None:
        if Path(argv[0]).name != "ibnetdiscover":
            return None
        Path(argv[argv.index("--cache") + 1]).write_text("cache")
        return ok(argv, lmc.replace("# lid 7 lmc 0", "# lid 9 lmc 0"))  # node4 moves to LID 9

    sweeper, _, _ = _sweeper(tmp_path, [discovery])
    result = sweeper.sweep()
    sweeper.close()
    routes = _routes(render(build_families(result, NameMap())))
    assert routes[(LEAF2, "2")] == ["node3"]  # LID 7 leaves leaf2 through port 2: node3's second LID
    assert routes[(LEAF2, "1")] == ["node3"] and "node4" not in {h for v in routes.values() for h in v}


def test_the_interval_is_an_option(tmp_path: Path) -> None:
    assert load_config([]).routes_interval_seconds == 300.0
    assert load_config(["--fabric.routes-interval-seconds", "0"]).routes_interval_seconds == 0.0
    with pytest.raises(ConfigError, match="routes_interval_seconds"):
        load_config(["--fabric.routes-interval-seconds", "-1"])
