"""The cluster server over HTTP: targets, the three exporters, controls and faults, all on one port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.fabric.model import format_guid
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import ClusterSpec, FabricSpec, PoolSpec, node_names
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.presets import generated_workload, preset_spec
from simulator.serve.runner import ClusterRunner
from tests.helpers import samples_of, wait_for
from tests.integration.processes import http_get
from tests.simulator.serve.helpers import PROMTOOL, post, promtool_problems, value

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ClusterServer]:
    """16 nodes in the afternoon (recsys 1-8, llm 9-16), clock frozen; at most 3 node exporters."""
    spec = preset_spec("small", nodes=16, seed=2)
    model = ClusterModel(spec, generated_workload(spec))
    model.advance(14 * 3600)
    settings = ServerSettings(
        listen_address="127.0.0.1:0", speed=0, workdir=tmp_path / "work", max_nodes=3, xid_timeout_ms=20
    )
    srv = ClusterServer(model, settings)
    srv.start()
    yield srv
    srv.close()


def _text(srv: ClusterServer, path: str) -> str:
    status, body = http_get(srv.port, path)
    assert status == 200, body
    return body.decode()


def _json(srv: ClusterServer, path: str) -> Any:
    return json.loads(_text(srv, path))


def test_targets_list_every_node_with_its_pool_and_metrics_path(server: ClusterServer) -> None:
    groups = _json(server, "/targets")
    assert len(groups) == 16
    assert groups[0] == {
        "targets": [f"127.0.0.1:{server.port}"],
        "labels": {
            "node": "node0001",
            "pool": "recsys",
            "instance": f"127.0.0.1:{server.port}/node0001",
            "__metrics_path__": "/nodes/node0001/metrics",
        },
    }
    llm = _json(server, "/targets?pool=llm&limit=3")
    assert [g["labels"]["node"] for g in llm] == ["node0009", "node0010", "node0011"]
    assert http_get(server.port, "/targets?limit=x")[0] == 400


@needs_promtool
def test_every_page_is_a_valid_exposition_of_the_real_exporters(server: ClusterServer) -> None:
    node = _text(server, "/nodes/node0001/metrics")
    fabric = _text(server, "/fabric/metrics")
    scheduler = _text(server, "/scheduler/metrics")
    for text in (node, fabric, scheduler):
        assert promtool_problems(text) == []
    assert len(samples_of(node, "ibpool_gpu_up")) == 8
    assert set(samples_of(node, "ibpool_exporter_collector_success").values()) == {1.0}
    jobs = samples_of(node, "ibpool_gpu_job_info")
    assert jobs and {dict(k)["pool"] for k in jobs} == {"recsys"}
    (port_info,) = samples_of(node, "ibpool_infiniband_port_info")
    (cable,) = [
        k for k in samples_of(fabric, "ibpool_fabric_link_info") if ("remote_desc", "node0001 mlx5_0") in k
    ]
    assert dict(port_info)["node_guid"] == dict(cable)["remote_guid"]  # one node, seen from both sides
    assert value(scheduler, "ibpool_pool_capacity_gpus", pool="recsys") == 64
    assert set(samples_of(fabric, "ibpool_fabric_switch_up").values()) == {1.0}


def test_node_exporters_are_made_on_first_scrape_and_bounded(server: ClusterServer) -> None:
    assert _json(server, "/-/model")["materialized_nodes"] == []
    for n in (1, 2, 3, 4, 1):
        _text(server, f"/nodes/node000{n}/metrics")
    assert _json(server, "/-/model")["materialized_nodes"] == ["node0003", "node0004", "node0001"]
    assert sorted(p.name for p in (server.workdir / "nodes").iterdir()) == [
        "node0001",
        "node0003",
        "node0004",
    ]
    assert http_get(server.port, "/nodes/node9999/metrics")[0] == 404


def test_a_partition_move_shows_in_the_scheduler_metrics_and_the_targets(server: ClusterServer) -> None:
    assert post(server.port, "/-/control/drain", b'NodeName=node0008 Reason="to llm"')[0] == 200
    status, answer = post(server.port, "/-/control/partition", b"PartitionName=recsys Nodes=node[0001-0007]")
    assert (status, answer["result"]) == (200, "partition recsys: 7 nodes")
    post(server.port, "/-/control/partition", b"PartitionName=llm Nodes=node[0008-0016]")
    assert post(server.port, "/-/control/resume?node=node0008")[0] == 200
    text = _text(server, "/scheduler/metrics")
    assert value(text, "ibpool_pool_node_info", pool="llm", node="node0008") == 1
    assert value(text, "ibpool_pool_node_info", pool="recsys", node="node0008") is None
    assert value(text, "ibpool_pool_capacity_gpus", pool="llm") == 72
    (group,) = _json(server, "/targets?pool=llm&limit=1")
    assert group["labels"] == {
        "node": "node0008",
        "pool": "llm",
        "instance": f"127.0.0.1:{server.port}/node0008",
        "__metrics_path__": "/nodes/node0008/metrics",
    }
    status, answer = post(server.port, "/-/control/partition", b"PartitionName=llm Nodes=node[0008-0099]")
    assert status == 400 and "unknown nodes" in str(answer["error"])


def test_vl_weights_are_taken_as_opensm_conf_lines(server: ClusterServer) -> None:
    status, answer = post(
        server.port, "/-/control/vl-weights", b"qos_vlarb_high 0:4\nqos_vlarb_low 0:28,1:224\n"
    )
    assert status == 200 and answer["ok"] is True
    assert _json(server, "/-/model")["qos"]["vl_weights"][:2] == [32, 224]
    status, answer = post(server.port, "/-/control/vl-weights", b"qos_vlarb_low 0:256\n")
    assert status == 400 and answer["ok"] is False
    assert _json(server, "/-/model")["qos"]["vl_weights"][:2] == [32, 224]


def test_faults_reach_the_node_fabric_and_scheduler_exporters(server: ClusterServer) -> None:
    leaf_port = {"node_desc": "leaf001", "port": "2"}
    assert value(_text(server, "/fabric/metrics"), "ibpool_fabric_port_state_id", **leaf_port) == 4
    assert post(server.port, "/-/fault?kind=link_down&node=node0002")[0] == 200
    assert value(_text(server, "/fabric/metrics"), "ibpool_fabric_port_state_id", **leaf_port) == 1
    node = _text(server, "/nodes/node0002/metrics")
    assert value(node, "ibpool_infiniband_state_id", device="mlx5_0", port="1") == 1

    assert post(server.port, "/-/fault?kind=lose_gpu&node=node0003&gpu=2")[0] == 200
    assert value(_text(server, "/nodes/node0003/metrics"), "ibpool_gpu_up", gpu="2") == 0

    _text(server, "/nodes/node0001/metrics")  # the XID watcher starts on the first scrape
    assert post(server.port, "/-/fault?kind=xid&node=node0001&gpu=0&xid=48")[0] == 200
    assert wait_for(
        lambda: (
            value(_text(server, "/nodes/node0001/metrics"), "ibpool_gpu_xid_errors_total", gpu="0", xid="48")
            == 1
        )
    )

    assert post(server.port, "/-/fault?kind=symbol_errors&port=leaf001/9&count=5")[0] == 200
    fabric = _text(server, "/fabric/metrics")
    assert value(fabric, "ibpool_fabric_port_symbol_error_total", node_desc="leaf001", port="9") == 5

    assert post(server.port, "/-/fault?kind=switch_down&switch=spine01")[0] == 200
    assert value(_text(server, "/fabric/metrics"), "ibpool_fabric_switch_up", node_desc="spine01") == 0

    assert post(server.port, "/-/fault?kind=scheduler_down")[0] == 200
    assert value(_text(server, "/scheduler/metrics"), "ibpool_scheduler_up") == 0
    assert http_get(server.port, "/healthz")[0] == 503
    post(server.port, "/-/fault?kind=scheduler_up")
    post(server.port, "/-/fault?kind=switch_up&switch=spine01")
    assert http_get(server.port, "/healthz")[0] == 200

    status, answer = post(server.port, "/-/fault?kind=lose_gpu&node=node0003")
    assert status == 400 and "gpu is required" in str(answer["error"])


def test_advance_moves_the_model_and_its_counters(server: ClusterServer) -> None:
    def sent() -> float:
        return sum(
            samples_of(
                _text(server, "/fabric/metrics"), "ibpool_fabric_port_data_transmitted_bytes_total"
            ).values()
        )

    before, time_before = sent(), _json(server, "/-/model")["time_seconds"]
    status, answer = post(server.port, "/-/control/advance?seconds=600")
    assert status == 200 and answer["time"] == time_before + 600
    assert sent() > before
    assert post(server.port, "/-/control/advance?seconds=-1")[0] == 400


def test_the_runner_moves_the_clock_at_its_speed() -> None:
    spec = preset_spec("small", nodes=4)
    runner = ClusterRunner(ClusterModel(spec, generated_workload(spec)), speed=3600.0, step_seconds=0.02)
    runner.start()
    try:
        assert wait_for(lambda: runner.now >= 60.0)
        assert runner.alive()
    finally:
        runner.stop(5.0)


def test_the_served_routes_decide_the_pools_the_embedded_source_puts_on_switch_ports(tmp_path: Path) -> None:
    """Pool a (node0001-0002) stays on leaf001; pool b (node0003, node0005) spans both leaves: by the
    cabling leaf001's uplink would carry a and b, by the routes only b; with node0005's cable down, none."""
    names = node_names(8)
    spec = ClusterSpec(
        nodes=names,
        pools=(PoolSpec("a", names[:2], "normal"), PoolSpec("b", (names[2], names[4]), "normal")),
        fabric=FabricSpec(hosts_per_leaf=4, oversubscription=4.0),
    )
    model = ClusterModel(spec)
    leaf1, spine1 = (format_guid(guid) for guid, _ in model.topology.switch_guids[::2])
    settings = ServerSettings(listen_address="127.0.0.1:0", speed=0, workdir=tmp_path / "work", max_nodes=8)
    srv = ClusterServer(model, settings)
    srv.start()
    try:
        fabric = _text(srv, "/fabric/metrics")
        routes = {
            (dict(k)["node_guid"], dict(k)["port"]): dict(k)
            for k in samples_of(fabric, "ibpool_fabric_port_route_info")
        }
        cabled = {
            (dict(k)["node_guid"], dict(k)["port"])
            for k in samples_of(fabric, "ibpool_fabric_link_info")
            if not dict(k)["node_desc"].startswith("node")
        }
        assert len(cabled) == 8 + 2 * 2 and cabled <= set(routes)  # host ports and both ends of 2 uplinks
        assert routes[(leaf1, "5")]["destinations"] == "node[0005-0008]"
        base = f"http://127.0.0.1:{srv.port}"
        source = EmbeddedSource(EmbeddedSettings(f"{base}/targets", window_seconds=0.2))
        got = source.fetch()
        assert got.links[f"{leaf1}/5"].pools == ("b",)  # the uplink
        assert got.links[f"{spine1}/1"].pools == ("b",)  # down to leaf001
        assert got.links[f"{leaf1}/1"].pools == ("a",)  # node0001's host port
        assert post(srv.port, "/-/fault?kind=link_down&node=node0005")[0] == 200
        fabric = _text(srv, "/fabric/metrics")
        (uplink,) = [
            k
            for k in samples_of(fabric, "ibpool_fabric_port_route_info")
            if ("node_guid", leaf1) in k and ("port", "5") in k
        ]
        assert dict(uplink)["destinations"] == "node[0006-0008]"
        assert source.fetch().links[f"{leaf1}/5"].pools == ()
    finally:
        srv.close()


class _Stops:
    """Stops at 25 and 60; says what the model's clock was at each."""

    def __init__(self, runner: ClusterRunner) -> None:
        self.runner = runner
        self.left = [25.0, 60.0]
        self.seen: list[float] = []

    def next_stop(self, now: float) -> float | None:
        return self.left[0] if self.left else None

    def reached(self, now: float) -> None:
        assert self.runner.now == now == self.left.pop(0)
        self.seen.append(now)


def test_an_advance_stops_at_each_stop_and_tells_the_listeners_first() -> None:
    spec = preset_spec("small", nodes=4)
    runner = ClusterRunner(ClusterModel(spec, generated_workload(spec)), speed=0)
    told: list[float] = []
    runner.on_change(lambda: told.append(runner.now))
    stops = _Stops(runner)
    runner.set_stops(stops)
    runner.advance(40.0)  # stops at 25, ends at 40
    runner.advance(30.0)  # stops at 60 (the stop due at the end of a piece is reached too), ends at 70
    assert stops.seen == [25.0, 60.0]
    assert told == [25.0, 40.0, 60.0, 70.0]
    assert runner.now == 70.0
