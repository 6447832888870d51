"""The fabric exporter's real families over the model's fabric view say exactly what the model says."""

from __future__ import annotations

import pytest

from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.collector import FabricCollector, FabricStatusCollector
from exporter.fabric.families import build_families
from exporter.fabric.model import format_guid
from exporter.fabric.names import NameMap
from foundation.exposition import render
from foundation.hostlist import expand_hostlist
from simulator.cluster.model import ClusterModel
from simulator.cluster.routing import forwarding
from simulator.cluster.spec import simple_spec
from simulator.cluster.views import PortView
from simulator.serve.errors import RequestError
from simulator.serve.fabric_source import SimulatedFabric, link_width_speed, sweep_result
from tests.helpers import samples_of
from tests.simulator.serve.helpers import PROMTOOL, congested_model, promtool_problems, value

MAX_32 = (1 << 32) - 1


def _text(model: ClusterModel, hca_ports: bool = False, unreachable: tuple[str, ...] = ()) -> str:
    result = sweep_result(model.fabric_view(), hca_ports=hca_ports, unreachable=unreachable)
    return render(build_families(result, NameMap(), hca_ports=hca_ports, vl_count=8))


def _labels(port: PortView) -> dict[str, str]:
    return {"node_guid": format_guid(port.node_guid), "port": str(port.port), "node_desc": port.node_desc}


def _switch_ports(model: ClusterModel) -> list[PortView]:
    return [p for p in model.fabric_view().ports if p.kind != "hca"]


def test_every_switch_port_counter_is_the_models_on_its_guid_and_port() -> None:
    model = congested_model()
    text = _text(model)
    ports = _switch_ports(model)
    waiting = 0
    for port in ports:
        labels = _labels(port)
        c = port.counters
        assert (
            value(text, "ibpool_fabric_port_data_transmitted_bytes_total", **labels)
            == c["port_xmit_data"] * 4
        )
        assert value(text, "ibpool_fabric_port_data_received_bytes_total", **labels) == c["port_rcv_data"] * 4
        assert value(text, "ibpool_fabric_port_packets_transmitted_total", **labels) == c["port_xmit_packets"]
        assert value(text, "ibpool_fabric_port_transmit_wait_total", **labels) == c["port_xmit_wait"]
        assert value(text, "ibpool_fabric_port_symbol_error_total", **labels) == c["symbol_error"]
        for vl, wait in enumerate(port.vl_xmit_wait):
            assert value(text, "ibpool_fabric_port_vl_transmit_wait_total", **labels, vl=str(vl)) == wait
        waiting += c["port_xmit_wait"] > 0
    assert waiting >= 2  # both pools' rings wait on the shared uplinks
    assert len(samples_of(text, "ibpool_fabric_port_symbol_error_total")) == len(ports)
    assert set(samples_of(text, "ibpool_fabric_port_scrape_success").values()) == {1.0}
    assert set(samples_of(text, "ibpool_fabric_switch_up").values()) == {1.0}


def test_congested_uplink_waits_on_the_low_weighted_vl() -> None:
    model = congested_model()
    uplink = next(p for p in _switch_ports(model) if (p.node_desc, p.port) == ("leaf001", 5))
    text = _text(model)
    waits = {
        vl: value(text, "ibpool_fabric_port_vl_transmit_wait_total", **_labels(uplink), vl=str(vl))
        for vl in (0, 1)
    }
    assert waits[0] == uplink.vl_xmit_wait[0] and waits[1] == uplink.vl_xmit_wait[1]
    assert (waits[0] or 0) > 0


def test_a_saturated_port_xmit_wait_is_flagged_and_64_bit_counters_are_not() -> None:
    model = congested_model(seconds=5.0)  # too short for a real wait counter to fill up
    port = model.topology.links[model.topology.uplink[0][0]].a  # leaf001's end of its uplink
    model.saturate(port)
    text = _text(model)
    labels = _labels(next(p for p in _switch_ports(model) if (p.node_desc, p.port) == ("leaf001", 5)))
    assert value(text, "ibpool_fabric_port_transmit_wait_total", **labels) == MAX_32
    flags = samples_of(text, "ibpool_fabric_port_counter_saturated")
    assert {dict(k)["counter"] for k in flags} == {"port_xmit_wait"}  # data and packets come 64-bit
    assert [dict(k) for k, v in flags.items() if v == 1] == [{**labels, "counter": "port_xmit_wait"}]


def test_a_congested_port_fills_its_32_bit_wait_counter_within_a_minute() -> None:
    model = congested_model(seconds=120.0)
    full = [p for p in _switch_ports(model) if p.xmit_wait_ticks > MAX_32]
    assert full  # NDR: 2e8 wait ticks per second at full wait
    text = _text(model)
    for port in full:
        assert value(text, "ibpool_fabric_port_transmit_wait_total", **_labels(port)) == MAX_32
        assert (
            value(text, "ibpool_fabric_port_counter_saturated", **_labels(port), counter="port_xmit_wait")
            == 1
        )


def test_link_info_is_the_cabling_with_the_models_link_rate() -> None:
    model = congested_model()
    text = _text(model)
    info = samples_of(text, "ibpool_fabric_link_info")
    expected = set()
    for port in _switch_ports(model):
        if port.remote_guid is None:
            continue
        remote = {
            "remote_guid": format_guid(port.remote_guid),
            "remote_port": str(port.remote_port),
            "remote_desc": port.remote_desc or "",
        }
        expected.add(tuple(sorted({**_labels(port), **remote}.items())))
        assert value(text, "ibpool_fabric_port_rate_bytes_per_second", **_labels(port)) == 50e9
        assert value(text, "ibpool_fabric_port_link_width_lanes", **_labels(port)) == 4
    assert set(info) == expected and len(expected) == 8 + 2 * 2  # host ports, and both ends of 2 uplinks
    assert link_width_speed(50e9) == (4, "NDR") and link_width_speed(1.0) == (None, None)


def test_a_down_link_shows_state_1_and_leaves_the_topology() -> None:
    model = congested_model()
    model.set_link(model.host_link("node0002"), False)
    text = _text(model)
    leaf_port = next(p for p in _switch_ports(model) if p.remote_desc == "node0002 mlx5_0")
    labels = _labels(leaf_port)
    assert value(text, "ibpool_fabric_port_state_id", **labels) == 1
    assert value(text, "ibpool_fabric_port_physical_state_id", **labels) == leaf_port.physical_state_id
    assert value(text, "ibpool_fabric_port_link_downed_total", **labels) == 1
    assert value(text, "ibpool_fabric_port_rate_bytes_per_second", **labels) is None
    assert not [
        k for k in samples_of(text, "ibpool_fabric_link_info") if ("remote_desc", "node0002 mlx5_0") in k
    ]
    assert value(text, "ibpool_fabric_port_state_id", **_labels(_switch_ports(model)[0])) == 4
    model.set_link(model.host_link("node0002"), True)
    assert value(_text(model), "ibpool_fabric_port_state_id", **labels) == 4


def test_hca_ports_are_read_when_asked() -> None:
    model = congested_model()
    hca = next(p for p in model.fabric_view().ports if p.node == "node0001")
    without = _text(model)
    assert value(without, "ibpool_fabric_port_transmit_wait_total", **_labels(hca)) is None
    text = _text(model, hca_ports=True)
    assert value(text, "ibpool_fabric_port_data_transmitted_bytes_total", **_labels(hca)) == (
        hca.counters["port_xmit_data"] * 4
    )


def test_a_switch_that_does_not_answer_marks_only_its_own_ports_failed() -> None:
    model = congested_model()
    leaf = format_guid(model.topology.switch_guids[0][0])
    text = _text(model, unreachable=(leaf,))
    up = {dict(k)["node_desc"]: v for k, v in samples_of(text, "ibpool_fabric_switch_up").items()}
    assert up == {"leaf001": 0.0, "leaf002": 1.0, "spine01": 1.0}
    success = samples_of(text, "ibpool_fabric_port_scrape_success")
    assert {v for k, v in success.items() if ("node_guid", leaf) in k} == {0.0}
    assert not [
        k for k in samples_of(text, "ibpool_fabric_port_symbol_error_total") if ("node_guid", leaf) in k
    ]
    assert (
        value(text, "ibpool_fabric_port_state_id", node_guid=leaf, port="1") == 4
    )  # discovery still sees it


def test_the_real_background_sweeper_and_collector_serve_the_simulated_sweep() -> None:
    model = congested_model()
    fabric = SimulatedFabric(model.fabric_view)
    background = BackgroundSweeper(fabric, 60.0, lambda r: build_families(r, NameMap(), vl_count=8), 120.0)
    assert background.run_once() is not None
    text = render(FabricCollector(background).collect() + FabricStatusCollector(background).collect())
    assert value(text, "ibpool_fabric_sweep_duration_seconds") is not None
    assert value(text, "ibpool_fabric_topology_age_seconds") is not None
    assert fabric.set_answering("spine01", False) == format_guid(model.topology.switch_guids[-1][0])
    background.run_once()
    text = render(FabricCollector(background).collect())
    assert (
        value(
            text,
            "ibpool_fabric_switch_up",
            node_desc="spine01",
            node_guid=fabric.set_answering("spine01", True),
        )
        == 0
    )
    with pytest.raises(RequestError, match="unknown switch"):
        fabric.set_answering("leaf999", False)
    assert background.health_problem() is None


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")
def test_promtool_accepts_the_exposition() -> None:
    model = congested_model()
    model.saturate(model.hca_port("node0001"))
    assert promtool_problems(_text(model, hca_ports=True)) == []


def test_the_model_qos_tables_show_as_live_weights_and_follow_a_change() -> None:
    model = congested_model()
    fabric = SimulatedFabric(model.fabric_view, read_qos=model.qos)
    background = BackgroundSweeper(fabric, 60.0, lambda r: build_families(r, NameMap(), vl_count=8), 120.0)
    background.run_once()
    text = render(FabricCollector(background).collect())
    weights = samples_of(text, "ibpool_vl_weight")
    switches = {format_guid(guid) for guid, _ in model.topology.switch_guids}
    seen = {dict(k)["node_guid"] for k in weights}
    assert seen == switches  # one port per switch (the exporter's default `first` mode)
    expected = dict(model.qos().vlarb_low)
    for key, weight in weights.items():
        labels = dict(key)
        if labels["table"] == "low" and int(labels["vl"]) in expected:
            assert weight == expected[int(labels["vl"])]
    model.set_vl_weights("0:4", "0:1,1:200,2:10")
    fabric.set_answering("spine01", False)
    background.run_once()
    text = render(FabricCollector(background).collect())
    low = {
        dict(k)["vl"]: v for k, v in samples_of(text, "ibpool_vl_weight").items() if dict(k)["table"] == "low"
    }
    assert low["1"] == 200 and low["2"] == 10
    assert len({dict(k)["node_guid"] for k in samples_of(text, "ibpool_vl_weight")}) == len(switches) - 1


def _routes(text: str) -> dict[tuple[str, str], tuple[str, ...]]:
    """(switch GUID, port) -> hosts of every `ibpool_fabric_port_route_info` series on the page."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for key in samples_of(text, "ibpool_fabric_port_route_info"):
        labels = dict(key)
        hosts = labels.get("destinations", "")
        out[(labels["node_guid"], labels["port"])] = tuple(expand_hostlist(hosts)) if hosts else ()
    return out


def _served(fabric: SimulatedFabric) -> str:
    return render(build_families(fabric.sweep(), NameMap(), vl_count=8))


def _two_uplinks() -> ClusterModel:
    """Eight nodes with two HCA ports (rails): leaf001 and leaf003 hold rail 0 of node0001-0004 and
    node0005-0008, leaf002 and leaf004 rail 1; two uplinks per leaf, one to each of two spines."""
    return ClusterModel(
        simple_spec({"a": 4, "b": 4}, hosts_per_leaf=4, oversubscription=2.0, ports_per_node=2)
    )


def test_every_cabled_switch_port_serves_the_hosts_the_model_routes_out_of_it() -> None:
    model = _two_uplinks()
    text = _served(SimulatedFabric(model.fabric_view, topology=model.topology))
    served = _routes(text)
    cabled = {
        (dict(k)["node_guid"], dict(k)["port"])
        for k in samples_of(text, "ibpool_fabric_link_info")
        if not dict(k)["node_desc"].startswith("node")
    }
    assert cabled and cabled <= set(served)
    assert served == forwarding(model.topology, model.fabric.link_up)
    leaf1 = format_guid(model.topology.switch_guids[0][0])
    assert served[(leaf1, "1")] == ("node0001",)  # the host port: only its host
    # D-mod-k: leaf001's two uplinks split leaf 2's hosts (node0005-0008) by their index
    assert {served[(leaf1, "5")], served[(leaf1, "6")]} == {
        ("node0006", "node0008"),
        ("node0005", "node0007"),
    }
    assert set(samples_of(text, "ibpool_fabric_switch_routes_scrape_success").values()) == {1.0}
    # without the model's topology the sweep reads no tables, as an exporter with the routes off
    assert not samples_of(_served(SimulatedFabric(model.fabric_view)), "ibpool_fabric_port_route_info")


def test_a_link_taken_down_changes_the_served_routes() -> None:
    model = _two_uplinks()
    fabric = SimulatedFabric(model.fabric_view, topology=model.topology)
    leaf1 = format_guid(model.topology.switch_guids[0][0])
    before = _routes(_served(fabric))
    model.set_link(model.uplink(0, 0), False)
    after = _routes(_served(fabric))
    assert after != before
    assert after[(leaf1, "5")] == () and after[(leaf1, "6")] == tuple(f"node000{i}" for i in range(5, 9))
    assert after == forwarding(model.topology, model.fabric.link_up)
    for rail in (0, 1):
        model.set_link(model.host_link("node0006", rail), False)
    gone = _routes(_served(fabric))
    assert "node0006" not in {h for hosts in gone.values() for h in hosts}  # no LID: in no table
    model.set_link(model.uplink(0, 0), True)
    for rail in (0, 1):
        model.set_link(model.host_link("node0006", rail), True)
    assert _routes(_served(fabric)) == before


def test_a_switch_that_does_not_answer_keeps_its_last_table() -> None:
    model = _two_uplinks()
    fabric = SimulatedFabric(model.fabric_view, topology=model.topology)
    leaf1 = format_guid(model.topology.switch_guids[0][0])
    spine1 = fabric.set_answering("spine01", False)  # silent from the start: no table at all
    before = _served(fabric)
    assert value(before, "ibpool_fabric_switch_routes_scrape_success", node_guid=spine1) == 0
    assert not [k for k in samples_of(before, "ibpool_fabric_port_route_info") if ("node_guid", spine1) in k]
    fabric.set_answering("spine01", True)
    fabric.set_answering("leaf001", False)
    model.set_link(model.uplink(2, 0), False)  # leaf003's first: routes to node0005, node0007 move
    text = _served(fabric)
    assert value(text, "ibpool_fabric_switch_routes_scrape_success", node_guid=leaf1) == 0
    assert value(text, "ibpool_fabric_switch_routes_scrape_success", node_guid=spine1) == 1
    served, now = _routes(text), forwarding(model.topology, model.fabric.link_up)
    assert served[(leaf1, "5")] == ("node0005", "node0007") != now[(leaf1, "5")]  # the last table read
    assert {k: v for k, v in served.items() if k[0] != leaf1} == {
        k: v for k, v in now.items() if k[0] != leaf1
    }
    for rail in (0, 1):  # node0006 leaves discovery; the other HCAs keep their LIDs, as OpenSM keeps them
        model.set_link(model.host_link("node0006", rail), False)
    kept = _routes(_served(fabric))
    assert kept[(leaf1, "5")] == ("node0005", "node0007") and kept[(leaf1, "6")] == ("node0008",)
    for rail in (0, 1):
        model.set_link(model.host_link("node0006", rail), True)
    fabric.set_answering("leaf001", True)
    assert _routes(_served(fabric)) == now
