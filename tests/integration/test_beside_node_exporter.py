"""ibpool beside a real node_exporter: only what node_exporter lacks, and rules and dashboards on either.

One generated sysfs tree (two NDR HCAs taking traffic and waits in a background thread) is read by the
real node_exporter (infiniband collector) and by `ibpool exporter`, with (`mirror`) or without
(`--no-collector.infiniband.mirror`) its node_infiniband_* twins. A real Prometheus scrapes both as
`ibpool targets` lists nodes (`node` and `instance` set to the node name) and loads both rule files.
Without the mirror, ibpool serves none of node_exporter's families, and the port rules and the node
dashboard's InfiniBand panels read node_exporter's series (job `node`); with it, ibpool's win and no port
is counted twice.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dashboards.queries import all_queries
from simulator.sysfs_tree import SysfsTree, dgx_hcas
from tests.integration import prometheus_server
from tests.integration.processes import free_port, http_get, ibpool_argv, start_http_program, stop
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
    pytest.mark.skipif(NODE_EXPORTER is None, reason="prometheus-node-exporter is not installed"),
]

ALERTS = Path(__file__).resolve().parents[2] / "alerts"
RULES = [ALERTS / "recording_rules.yml", ALERTS / "alert_rules.yml"]
DEVICES = ("mlx5_0", "mlx5_1")
CONFIG = """
global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: node
    static_configs: [{{targets: ["127.0.0.1:{node_exporter}"], labels: {{node: gpu01, instance: gpu01}}}}]
  - job_name: ibpool-node
    static_configs: [{{targets: ["127.0.0.1:{ibpool}"], labels: {{node: gpu01, instance: gpu01}}}}]
"""
# The node dashboard's InfiniBand panels that read counters, rate or state (and must have data here).
IB_PANELS = {
    ("Throughput against link rate", "A"),
    ("Throughput against link rate", "B"),
    ("Throughput against link rate", "C"),
    ("Transmit utilization", "A"),
    ("Transmit wait (congestion)", "A"),
    ("Port state", "A"),
    ("Physical state", "A"),
    ("Ports", "A"),
    ("device", "device"),
}


def families(port: int) -> set[str]:
    status, body = http_get(port, "/metrics")
    assert status == 200
    return {f.name for f in text_string_to_metric_families(body.decode())}


@contextmanager
def busy(tree: SysfsTree) -> Iterator[None]:
    """Both ports send 10% of their 50e9 bytes/s and wait 10% of the time, in 0.2 s steps."""
    stop_event = threading.Event()

    def run() -> None:
        while not stop_event.wait(0.2):
            for device in DEVICES:
                tree.add_traffic(device, 1, tx_bytes=1_000_000_000, rx_bytes=500_000_000)
                tree.add_wait(device, 1, 3_906_250)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop_event.set()
        thread.join(timeout=5)


@contextmanager
def running(tmp_path: Path, mirror: bool) -> Iterator[tuple[PrometheusServer, set[str], set[str]]]:
    """Both exporters on one tree, scraped by Prometheus: (prometheus, node_exporter's families, ours)."""
    assert NODE_EXPORTER is not None
    tree = SysfsTree(tmp_path / "sysfs", dgx_hcas(len(DEVICES)), seed=3)
    with ExitStack() as stack:
        stack.enter_context(busy(tree))
        theirs_port, ours_port = free_port(), free_port()
        theirs = [
            NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{theirs_port}", f"--path.sysfs={tree.root}",
            "--collector.disable-defaults", "--collector.infiniband",
        ]  # fmt: skip
        stack.callback(stop, start_http_program(theirs, theirs_port))
        mirror_flag = "--collector.infiniband.mirror" if mirror else "--no-collector.infiniband.mirror"
        ours = ibpool_argv(
            "exporter", "--sysfs-root", str(tree.root), "--no-collector.gpu", "--no-collector.jobs",
            "--no-collector.verbs", mirror_flag, "--web.listen-address", f"127.0.0.1:{ours_port}",
        )  # fmt: skip
        stack.callback(stop, start_http_program(ours, ours_port))
        workdir = tmp_path / "prometheus"
        workdir.mkdir()
        config = CONFIG.format(node_exporter=theirs_port, ibpool=ours_port)
        prom = stack.enter_context(prometheus_server.running(config, RULES, workdir=workdir))
        prom.wait_for_targets(up=2)
        yield prom, families(theirs_port), families(ours_port)


def port_series(prom: PrometheusServer, rule: str) -> list[tuple[str, str]]:
    """(job, device) of every series of `rule`, after it has one per port."""
    result = prom.wait_for_query(rule, lambda r: len(r) >= len(DEVICES), timeout=60)
    return sorted((s["metric"]["job"], s["metric"]["device"]) for s in result)


def assert_rules_healthy(prom: PrometheusServer) -> None:
    broken = [r["name"] for g in prom.rules() for r in g["rules"] if r.get("health") != "ok"]
    assert not broken, broken


def test_without_the_mirror_node_exporter_feeds_the_rules_and_the_node_dashboard(tmp_path: Path) -> None:
    with running(tmp_path, mirror=False) as (prom, theirs, ours):
        node_families = {name for name in theirs if name.startswith("node_infiniband_")}
        assert len(node_families) >= 20
        twins = {"ibpool_" + name.removeprefix("node_") for name in node_families}
        assert not twins & ours, f"stored twice: {sorted(twins & ours)}"
        assert {
            "ibpool_infiniband_port_info",
            "ibpool_infiniband_link_width_lanes",
            "ibpool_infiniband_hw_counter",
            "ibpool_infiniband_counter_saturated",
        } <= ours

        from_node_exporter = [("node", device) for device in DEVICES]
        for rule in (
            "port:ibpool_infiniband_congestion:ratio_rate5m > 0",
            "port:ibpool_infiniband_transmit_utilization:ratio_rate5m > 0",
            "port:ibpool_infiniband_receive_utilization:ratio_rate5m > 0",
            "port:ibpool_infiniband_port_active:bool == 1",
            "port:ibpool_infiniband_expected_rate_bytes_per_second:config",
        ):
            assert port_series(prom, rule) == from_node_exporter, rule
        assert_rules_healthy(prom)

        node_queries = [q for q in all_queries() if q.dashboard_uid == "ibpool-node"]
        assert {(q.title, q.ref_id) for q in node_queries} >= IB_PANELS
        for q in node_queries:
            if (q.title, q.ref_id) in IB_PANELS:
                result = prom.wait_for_query(q.promql(), timeout=30)
                devices = {s["metric"].get(q.label or "device") for s in result}
                assert set(DEVICES) <= devices, (q.title, q.ref_id, result[:2])


def test_with_the_mirror_ibpool_wins_and_nothing_is_counted_twice(tmp_path: Path) -> None:
    with running(tmp_path, mirror=True) as (prom, theirs, ours):
        twins = {
            "ibpool_" + name.removeprefix("node_") for name in theirs if name.startswith("node_infiniband")
        }
        assert twins <= ours
        from_ibpool = [("ibpool-node", device) for device in DEVICES]
        for rule in (
            "port:ibpool_infiniband_congestion:ratio_rate5m > 0",
            "port:ibpool_infiniband_port_active:bool == 1",
            "port:ibpool_infiniband_expected_rate_bytes_per_second:config",
        ):
            assert port_series(prom, rule) == from_ibpool, rule
        assert_rules_healthy(prom)
