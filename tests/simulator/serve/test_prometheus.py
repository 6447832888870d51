"""A real Prometheus scrapes the simulated cluster through one port: http_sd nodes, fabric, scheduler."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.cluster.model import ClusterModel
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.presets import generated_workload, preset_spec
from tests.integration import prometheus_server
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer
from tests.simulator.serve.helpers import post

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
]

NODES = 8
CONFIG = """
global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: sim-nodes
    honor_labels: true
    http_sd_configs: [{{url: "http://127.0.0.1:{port}/targets", refresh_interval: 2s}}]
  - job_name: sim-fabric
    metrics_path: /fabric/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
  - job_name: sim-scheduler
    metrics_path: /scheduler/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
"""
RULES = """
groups:
  - name: sim
    rules:
      - record: pool:ibpool_pool_capacity_gpus:sum
        expr: sum by (pool) (ibpool_pool_capacity_gpus)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterServer]:
    """8 nodes (recsys 1-4, llm 5-8) at 60 simulated seconds per second, from the afternoon on."""
    spec = preset_spec("small", nodes=NODES, seed=5)
    model = ClusterModel(spec, generated_workload(spec))
    model.advance(14 * 3600)
    workdir: Path = tmp_path_factory.mktemp("cluster")
    server = ClusterServer(model, ServerSettings(listen_address="127.0.0.1:0", speed=60.0, workdir=workdir))
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def prometheus(
    cluster: ClusterServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    rules = tmp_path_factory.mktemp("rules") / "sim.yml"
    rules.write_text(RULES)
    with prometheus_server.running(CONFIG.format(port=cluster.port), rule_files=[rules]) as prom:
        yield prom


def test_every_target_is_up(prometheus: PrometheusServer) -> None:
    targets = prometheus.wait_for_targets(up=NODES + 2)
    assert len(targets) == NODES + 2
    nodes = [t for t in targets if t["labels"]["job"] == "sim-nodes"]
    assert sorted(t["labels"]["node"] for t in nodes) == [f"node{i:04d}" for i in range(1, NODES + 1)]
    assert all(t["scrapeUrl"].endswith(f"/nodes/{t['labels']['node']}/metrics") for t in nodes)
    up = prometheus.wait_for_query(
        "up", lambda r: len(r) == NODES + 2 and all(s["value"][1] == "1" for s in r)
    )
    assert {s["metric"]["job"] for s in up} == {"sim-nodes", "sim-fabric", "sim-scheduler"}


def test_pool_capacity_and_node_gpu_utilization_are_queryable(prometheus: PrometheusServer) -> None:
    capacity = prometheus.wait_for_query("ibpool_pool_capacity_gpus", lambda r: len(r) == 2)
    assert {s["metric"]["pool"]: float(s["value"][1]) for s in capacity} == {"recsys": 32.0, "llm": 32.0}
    util = prometheus.wait_for_query('ibpool_gpu_utilization_ratio{node="node0001"}', lambda r: len(r) == 8)
    assert {s["metric"]["pool"] for s in util} == {"recsys"} and {s["metric"]["job"] for s in util} == {
        "sim-nodes"
    }
    assert all(0.0 <= float(s["value"][1]) <= 1.0 for s in util)
    assert prometheus.query('{exported_pool=~".+"}') == []  # honor_labels: job_info keeps its own pool
    switches = prometheus.wait_for_query("ibpool_fabric_switch_up", lambda r: len(r) > 0)
    assert {s["value"][1] for s in switches} == {"1"}


def test_rules_evaluate_over_the_simulated_cluster(prometheus: PrometheusServer) -> None:
    prometheus.wait_for_rule_evaluations(2)
    recorded = prometheus.wait_for_query("pool:ibpool_pool_capacity_gpus:sum", lambda r: len(r) == 2)
    assert sorted(float(s["value"][1]) for s in recorded) == [32.0, 32.0]


def test_a_partition_move_reaches_prometheus(cluster: ClusterServer, prometheus: PrometheusServer) -> None:
    assert post(cluster.port, "/-/control/partition", b"PartitionName=recsys Nodes=node[0001-0003]")[0] == 200
    assert post(cluster.port, "/-/control/partition", b"PartitionName=llm Nodes=node[0004-0008]")[0] == 200
    prometheus.wait_for_query('ibpool_pool_capacity_gpus{pool="llm"} == 40')
    prometheus.wait_for_query('ibpool_gpu_up{node="node0004", pool="llm"}', lambda r: len(r) == 8)
