"""SweepResult -> exposition: exact values on the right node_guid/port, x4 bytes, flags, topology."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.families import build_families
from exporter.fabric.model import SweepResult
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandResult
from foundation.exposition import render
from tests.exporter.fabric.helpers import (
    LEAF1,
    LEAF2,
    NODE1,
    SPINE1,
    Handler,
    ScriptedRunner,
    ok,
    perfquery_lid,
    vl_values,
)
from tests.helpers import samples_of

PROMTOOL = shutil.which("promtool")
LEAF1_DESC = "MF0;leaf-1:MQM8700/U1"


def _sweep(tmp_path: Path, handlers: list[Handler], **settings: object) -> SweepResult:
    sweeper = Sweeper(
        DiagCommands(DiagOptions()),
        ScriptedRunner(handlers),
        SweepSettings(**settings),  # type: ignore[arg-type]
        tmp_path,
    )
    try:
        return sweeper.sweep()
    finally:
        sweeper.close()


def _text(
    result: SweepResult, names: NameMap | None = None, hca_ports: bool = False, vl_count: int = 16
) -> str:
    return render(build_families(result, names or NameMap(), hca_ports, vl_count))


def _value(text: str, name: str, **labels: str) -> float | None:
    wanted = tuple(sorted(labels.items()))
    for key, value in samples_of(text, name).items():
        if all(item in key for item in wanted):
            return value
    return None


def _port(guid: str, port: int, desc: str) -> dict[str, str]:
    return {"node_guid": guid, "port": str(port), "node_desc": desc}


def test_counters_exactly_as_read(tmp_path: Path) -> None:
    result = _sweep(tmp_path, [vl_values({(3, 3, 3): 42, (3, 3, 9): 9})])
    text = _text(result)
    leaf1 = {n: _port(LEAF1, n, LEAF1_DESC) for n in range(1, 7)}
    assert _value(text, "ibpool_fabric_port_symbol_error_total", **leaf1[1]) == 7
    assert _value(text, "ibpool_fabric_port_data_transmitted_bytes_total", **leaf1[2]) == 123456789228 * 4
    assert _value(text, "ibpool_fabric_port_transmit_wait_total", **leaf1[2]) == 4294967295
    saturated = samples_of(text, "ibpool_fabric_port_counter_saturated")
    assert saturated[tuple(sorted({**leaf1[2], "counter": "port_xmit_wait"}.items()))] == 1
    assert saturated[tuple(sorted({**leaf1[1], "counter": "port_xmit_wait"}.items()))] == 0
    assert {dict(k)["counter"] for k in saturated} == {"port_xmit_wait"}  # 64-bit data counters: no flag
    assert _value(text, "ibpool_fabric_port_vl_transmit_wait_total", **leaf1[3], vl="3") == 42
    assert _value(text, "ibpool_fabric_port_vl_transmit_wait_total", **leaf1[3], vl="9") == 9
    assert len(samples_of(text, "ibpool_fabric_port_vl_transmit_wait_total")) == 3 * 6 * 16
    data_vls = _text(result, vl_count=8)
    assert _value(data_vls, "ibpool_fabric_port_vl_transmit_wait_total", **leaf1[3], vl="9") is None
    assert len(samples_of(data_vls, "ibpool_fabric_port_vl_transmit_wait_total")) == 3 * 6 * 8


def test_states_rates_and_topology(tmp_path: Path) -> None:
    text = _text(_sweep(tmp_path, []))
    port1, port4 = _port(LEAF1, 1, LEAF1_DESC), _port(LEAF1, 4, LEAF1_DESC)
    assert _value(text, "ibpool_fabric_port_state_id", **port1) == 4
    assert _value(text, "ibpool_fabric_port_physical_state_id", **port1) == 5
    assert _value(text, "ibpool_fabric_port_state_id", **port4) == 1
    assert _value(text, "ibpool_fabric_port_physical_state_id", **port4) == 2
    assert _value(text, "ibpool_fabric_port_rate_bytes_per_second", **port1) == 12_500_000_000
    assert _value(text, "ibpool_fabric_port_link_width_lanes", **port1) == 4
    assert _value(text, "ibpool_fabric_port_rate_bytes_per_second", **port4) is None  # not cabled: omitted
    links = samples_of(text, "ibpool_fabric_link_info")
    assert len(links) == 8  # the switch end of every cable: 3 + 3 + 2 (HCA ports are off)
    remote = {"remote_guid": NODE1, "remote_port": "1", "remote_desc": "node1"}
    assert links[tuple(sorted({**port1, **remote}.items()))] == 1
    uplink = {
        **_port(SPINE1, 1, "spine1"),
        "remote_guid": LEAF1,
        "remote_port": "3",
        "remote_desc": LEAF1_DESC,
    }
    assert links[tuple(sorted(uplink.items()))] == 1
    switch_up = samples_of(text, "ibpool_fabric_switch_up")
    assert sorted(dict(k)["node_desc"] for k, v in switch_up.items() if v == 1) == [
        LEAF1_DESC,
        "leaf2",
        "spine1",
    ]
    assert set(samples_of(text, "ibpool_fabric_port_scrape_success").values()) == {1}
    assert len(samples_of(text, "ibpool_fabric_port_scrape_success")) == 18
    ages = samples_of(text, "ibpool_fabric_port_counters_age_seconds")  # as of the sweep's end
    assert len(ages) == 18 and all(0 <= age < 60 for age in ages.values())
    assert "ibpool_fabric_sweep_timestamp_seconds" not in text  # how the sweep went: the status collector


def test_a_failed_switch_serves_zeros_for_itself_only(tmp_path: Path) -> None:
    def leaf2_fails(argv: tuple[str, ...]) -> CommandResult | None:
        return ok(argv, "", 255, "failed\n") if perfquery_lid(argv) == 4 else None

    text = _text(_sweep(tmp_path, [leaf2_fails]))
    assert _value(text, "ibpool_fabric_switch_up", node_guid=LEAF2) == 0
    assert _value(text, "ibpool_fabric_switch_up", node_guid=LEAF1) == 1
    success = samples_of(text, "ibpool_fabric_port_scrape_success")
    assert {dict(k)["node_guid"] for k, v in success.items() if v == 0} == {LEAF2}
    assert _value(text, "ibpool_fabric_port_symbol_error_total", node_guid=LEAF2) is None
    assert _value(text, "ibpool_fabric_port_symbol_error_total", **_port(LEAF1, 1, LEAF1_DESC)) == 7
    assert _value(text, "ibpool_fabric_port_state_id", node_guid=LEAF2, port="1") == 4  # topology still known


def test_vanished_switch_is_reported_down(tmp_path: Path) -> None:
    result = _sweep(tmp_path, [])
    leaf2 = result.topology.nodes[LEAF2]
    nodes = {g: n for g, n in result.topology.nodes.items() if g != LEAF2}
    gone = SweepResult(
        result.topology.__class__(nodes, result.topology.links),
        result.states,
        {g: r for g, r in result.readings.items() if g != LEAF2},
        {LEAF2: leaf2},
        result.finished_at,
        result.duration_seconds,
    )
    text = _text(gone)
    assert _value(text, "ibpool_fabric_switch_up", node_guid=LEAF2, node_desc="leaf2") == 0
    ports = {
        dict(k)["port"]: v
        for k, v in samples_of(text, "ibpool_fabric_port_scrape_success").items()
        if dict(k)["node_guid"] == LEAF2
    }
    assert ports == {str(p): 0 for p in range(1, 7)}


def test_names_from_the_map_and_hca_ports(tmp_path: Path) -> None:
    result = _sweep(tmp_path, [], hca_ports=True)
    names = NameMap({LEAF1: "leaf-01", NODE1: "gpu-node-001"})
    text = _text(result, names, hca_ports=True)
    assert _value(text, "ibpool_fabric_port_symbol_error_total", **_port(LEAF1, 1, "leaf-01")) == 7
    node1 = _port(NODE1, 1, "gpu-node-001")
    assert _value(text, "ibpool_fabric_port_scrape_success", **node1) == 1
    assert _value(text, "ibpool_fabric_port_data_transmitted_bytes_total", **node1) is not None
    link = {**node1, "remote_guid": LEAF1, "remote_port": "1", "remote_desc": "leaf-01"}
    assert samples_of(text, "ibpool_fabric_link_info")[tuple(sorted(link.items()))] == 1
    assert 'ibpool_fabric_switch_up{node_guid="0x0000000000100000"' not in text
    without = _text(result, names, hca_ports=False)
    assert NODE1 not in "".join(
        k for k in without.splitlines() if not k.startswith("ibpool_fabric_link_info")
    )


@pytest.mark.integration
@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")
def test_promtool_accepts_the_exposition(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    text = _text(_sweep(tmp_path, [vl_values({(3, 3, 3): 42})], hca_ports=True), hca_ports=True)
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip()
        and "ibpool_fabric_port_counter_saturated metric name should not include type" not in line
    ]
    assert result.returncode in (0, 3) and problems == [], problems
