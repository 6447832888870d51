"""VL arbitration reads in a sweep (scripted diagnostics): which ports, failures, exposition, config."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.config import load_config
from exporter.fabric.families import build_families
from exporter.fabric.model import FabricNode, Link, PortState, SweepResult, Topology
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from exporter.fabric.vlarb_read import active_ports, vlarb_targets
from foundation.commands import CommandResult
from foundation.errors import ConfigError
from foundation.exposition import render
from tests.exporter.fabric.helpers import LEAF1, LEAF2, SPINE1, Handler, ScriptedRunner, data, ok
from tests.helpers import samples_of

LEAF1_DESC = "MF0;leaf-1:MQM8700/U1"
LOW = {0: 0, 1: 64, 2: 32, 3: 16, 4: 8, 5: 4, 6: 2, 7: 1}  # RECIPES.md qos_vlarb_low
HIGH = {0: 4, **{vl: 0 for vl in range(1, 8)}}  # qos_vlarb_high 0:4,1:0,...


def _sweeper(tmp_path: Path, handlers: list[Handler], **settings: object) -> tuple[Sweeper, ScriptedRunner]:
    runner = ScriptedRunner(handlers)
    settings = {"vl_counters": "off", **settings}
    sweeper = Sweeper(DiagCommands(DiagOptions()), runner, SweepSettings(**settings), tmp_path)  # type: ignore[arg-type]
    return sweeper, runner


def _sweep(
    tmp_path: Path, handlers: list[Handler] | None = None, **settings: object
) -> tuple[SweepResult, list[str]]:
    tmp_path.mkdir(exist_ok=True)
    sweeper, runner = _sweeper(tmp_path, handlers or [], **settings)
    try:
        result = sweeper.sweep()
    finally:
        sweeper.close()
    reads = [" ".join(c[-2:]) for c in runner.calls if Path(c[0]).name == "smpquery"]
    return result, sorted(reads)


def _metrics(result: SweepResult) -> str:
    return render(build_families(result, NameMap()))


def _weights(text: str, guid: str, port: int, table: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for labels, value in samples_of(text, "ibpool_vl_weight").items():
        got = dict(labels)
        if (got["node_guid"], got["port"], got["table"]) == (guid, str(port), table):
            assert got["source"] == "live"
            out[int(got["vl"])] = value
    return out


def test_first_reads_one_active_port_per_switch(tmp_path: Path) -> None:
    result, reads = _sweep(tmp_path)
    assert reads == ["2 1", "3 1", "4 1"]  # spine1, leaf1, leaf2: port 1 is the first active one
    assert sorted(result.vlarb) == sorted([(LEAF1, 1), (LEAF2, 1), (SPINE1, 1)])
    text = _metrics(result)
    assert _weights(text, LEAF1, 1, "low") == LOW
    assert _weights(text, LEAF1, 1, "high") == HIGH
    success = samples_of(text, "ibpool_fabric_port_vlarb_scrape_success")
    assert set(success.values()) == {1.0} and len(success) == 3
    labels = {"node_guid": LEAF1, "port": "1", "node_desc": LEAF1_DESC}
    assert success[tuple(sorted(labels.items()))] == 1.0


def test_all_reads_every_active_port_and_off_reads_none(tmp_path: Path) -> None:
    _, reads = _sweep(tmp_path / "all", vlarb_ports="all")
    assert reads == sorted(["2 1", "2 2", "3 1", "3 2", "3 3", "4 1", "4 2", "4 3"])  # Down ports skipped
    result, reads = _sweep(tmp_path / "off", vlarb_ports="off")
    assert reads == [] and not result.vlarb
    text = _metrics(result)
    assert "ibpool_vl_weight" not in text and "vlarb_scrape_success" not in text


def test_without_port_states_cabled_ports_count_as_active(tmp_path: Path) -> None:
    _, reads = _sweep(tmp_path, vlarb_ports="all", port_states=False)
    assert reads == sorted(["2 1", "2 2", "3 1", "3 2", "3 3", "4 1", "4 2", "4 3"])


def test_active_ports_prefers_the_port_state() -> None:
    node = FabricNode("0x01", "switch", "sw", 4, lid=7)
    topology = Topology({"0x01": node}, {("0x01", 1): Link("0x02", 1), ("0x01", 3): Link("0x03", 1)})
    states = {("0x01", 1): PortState(1, 2), ("0x01", 2): PortState(4, 5)}  # 1 cabled but down; 2 active
    assert active_ports(node, topology, states) == [2, 3]  # 3: no state, cabled
    assert vlarb_targets(topology, states, "first") == [(("0x01", 2), 7)]
    no_lid = Topology({"0x01": FabricNode("0x01", "switch", "sw", 4)}, topology.links)
    assert vlarb_targets(no_lid, states, "all") == []


def _leaf2_port1(answer: CommandResult) -> Handler:
    """leaf2 (LID 4) port 1 answers `answer`; every other command as captured."""

    def handler(argv: tuple[str, ...]) -> CommandResult | None:
        if Path(argv[0]).name == "smpquery" and argv[-2:] == ("4", "1"):
            return replace(answer, argv=argv)
        return None

    return handler


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (ok((), "", 255, "ibwarn: [9] mad_rpc: _do_madrpc failed; dport (Lid 4)\n"), "exit 255"),
        (CommandResult((), -9, "", "", 10.0, timed_out=True), "no answer"),
        (ok((), data("smpquery_vlarb_port0.txt")), "LowCap"),
    ],
    ids=["exit", "timeout", "garbled"],
)
def test_a_failed_port_is_reported_and_fails_nothing_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: CommandResult, why: str
) -> None:
    sweeper, _ = _sweeper(tmp_path, [_leaf2_port1(answer)])
    background = BackgroundSweeper(sweeper, 60.0, lambda r: build_families(r, NameMap()), 300.0)
    with caplog.at_level(logging.WARNING, logger="exporter.fabric.background"):
        published = background.run_once()
    sweeper.close()
    assert published is not None  # the sweep completed
    result = published.result
    assert all(r.up for r in result.readings.values()) and not result.problems
    assert result.vlarb[(LEAF2, 1)].tables is None and why in (result.vlarb[(LEAF2, 1)].error or "")
    assert background.health_problem() is None
    text = render(list(published.families))
    success = {
        dict(k)["node_guid"]: v
        for k, v in samples_of(text, "ibpool_fabric_port_vlarb_scrape_success").items()
    }
    assert success == {LEAF1: 1.0, LEAF2: 0.0, SPINE1: 1.0}
    assert _weights(text, LEAF2, 1, "low") == {} and _weights(text, LEAF1, 1, "low") == LOW
    switch_up = samples_of(text, "ibpool_fabric_switch_up")
    assert set(switch_up.values()) == {1.0}
    lines = [r.getMessage() for r in caplog.records if "VL arbitration" in r.getMessage()]
    assert len(lines) == 1 and f"{LEAF2}[1]" in lines[0] and why in lines[0]


def test_vlarb_ports_flag_and_yaml(tmp_path: Path) -> None:
    assert load_config([]).vlarb_ports == "first"
    assert load_config(["--fabric.vlarb-ports=all"]).vlarb_ports == "all"
    config = tmp_path / "fabric.yml"
    config.write_text("fabric:\n  vlarb_ports: off\n")  # YAML 1.1 reads a bare off as false
    assert load_config([f"--config.file={config}"]).vlarb_ports == "off"
    with pytest.raises(ConfigError) as info:
        load_config(["--fabric.vlarb-ports=some"])
    assert any("vlarb_ports" in p and "off, first, all" in p for p in info.value.problems)


def test_smpquery_argv_carries_the_diag_options() -> None:
    commands = DiagCommands(DiagOptions(ca="mlx5_0", port=1, timeout_ms=200))
    argv = commands.vlarb(4, 3)
    assert Path(argv[0]).name == "smpquery"
    assert argv[1:] == ["-C", "mlx5_0", "-P", "1", "-t", "200", "vlarb", "4", "3"]
