"""Contract: PrometheusSource (PromQL over the recording rules) and EmbeddedSource agree on one cluster.

The simulated cluster server runs in-process at real time (two long chatty jobs: steady rates); a real
Prometheus scrapes it with alerts/recording_rules.yml loaded. Tolerances: counts and labels exact; GPU
utilization within 0.05; rate-derived ratios (congestion, utilization, per-VL waits) within 0.05 + 10 %
(Prometheus extrapolates a 5m rate over 1 s scrapes, the embedded source takes a delta over its window);
a port whose saturation flag differs between the two reads (its counter saturated in between) is skipped.
Slow (about 6 minutes): Prometheus's 5m rates need 5 minutes of samples before they read right.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from recommender.signals.model import Signals
from recommender.signals.prometheus import PrometheusSettings, PrometheusSource
from simulator.cluster import scenarios
from simulator.cluster.model import ClusterModel
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.qos_reader import SimulatorQos
from tests.integration import prometheus_server
from tests.integration.prometheus_server import PROMETHEUS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
]

RULES = Path(__file__).resolve().parents[2] / "alerts" / "recording_rules.yml"
CONFIG = """
global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: ibpool-nodes
    honor_labels: true
    http_sd_configs: [{{url: "http://127.0.0.1:{port}/targets", refresh_interval: 2s}}]
    # One instance per node, as in production: the port rules join `on (instance, job, device, port)`,
    # which is not unique when every simulated node answers on the same HOST:PORT.
    relabel_configs: [{{source_labels: [node], target_label: instance}}]
  - job_name: ibpool-fabric
    metrics_path: /fabric/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
  - job_name: ibpool-scheduler
    metrics_path: /scheduler/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
"""
RATIO_ABS, RATIO_REL, UTIL_ABS = 0.05, 0.10, 0.05
RATE_WINDOW_FILL_SECONDS = 310.0


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= RATIO_ABS + RATIO_REL * max(abs(a), abs(b))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterServer]:
    model = ClusterModel(scenarios.shared_uplink_spec(), [scenarios.chatty("hi"), scenarios.chatty("lo")])
    model.advance(10.0)
    work = tmp_path_factory.mktemp("cluster")
    server = ClusterServer(model, ServerSettings(listen_address="127.0.0.1:0", speed=1.0, workdir=work))
    server.start()
    yield server
    server.close()


def test_both_sources_agree(cluster: ClusterServer) -> None:
    base = f"http://127.0.0.1:{cluster.port}"
    with prometheus_server.running(CONFIG.format(port=cluster.port), rule_files=[RULES]) as prom:
        prom.wait_for_targets(up=10)
        prom.wait_for_query("port:ibpool_infiniband_transmit_utilization:ratio_rate5m", lambda r: len(r) >= 4)
        prom.wait_for_query("port:ibpool_infiniband_congestion:ratio_rate5m", lambda r: len(r) >= 4)
        prom.wait_for_query("pool:ibpool_gpu_utilization_ratio:avg", lambda r: len(r) == 2)
        # rate(x[5m]) divides by the whole range: it reads right only once 5 minutes of samples exist.
        time.sleep(RATE_WINDOW_FILL_SECONDS)
        qos = SimulatorQos(f"{base}/-/model")
        embedded = EmbeddedSource(EmbeddedSettings(f"{base}/targets", window_seconds=5.0), qos).fetch()
        promql = PrometheusSource(PrometheusSettings(prom.url), qos).fetch()
    compare(embedded, promql)


def compare(a: Signals, b: Signals) -> None:
    assert a.missing == () and b.missing == (), (a.missing, b.missing)
    assert a.qos is not None and b.qos is not None
    assert (a.qos.vlarb_low, a.qos.pool_sl) == (b.qos.vlarb_low, b.qos.pool_sl)
    assert set(a.pools) == set(b.pools) == {"hi", "lo"}
    for name, pa in a.pools.items():
        pb = b.pools[name]
        assert (pa.capacity_gpus, pa.allocated_gpus, pa.pending_gpus, pa.idle_nodes) == (
            pb.capacity_gpus, pb.allocated_gpus, pb.pending_gpus, pb.idle_nodes,
        )  # fmt: skip
        assert pa.utilization is not None and pb.utilization is not None
        assert abs(pa.utilization - pb.utilization) <= UTIL_ABS, name
    assert set(a.nodes) == set(b.nodes)
    for name, na in a.nodes.items():
        nb = b.nodes[name]
        assert (na.pools, na.state) == (nb.pools, nb.state), name
        assert na.gpu_utilization is not None and nb.gpu_utilization is not None
        assert abs(na.gpu_utilization - nb.gpu_utilization) <= UTIL_ABS, name
    assert set(a.links) == set(b.links)
    compared = 0
    for key, la in a.links.items():
        lb = b.links[key]
        assert (la.kind, la.node, la.pools, la.rate_bytes_per_second) == (
            lb.kind, lb.node, lb.pools, lb.rate_bytes_per_second,
        ), key  # fmt: skip
        if la.saturated != lb.saturated:
            continue
        assert close(la.congestion, lb.congestion), (key, la.congestion, lb.congestion)
        assert close(la.utilization, lb.utilization), (key, la.utilization, lb.utilization)
        for vl in set(la.vl_congestion) & set(lb.vl_congestion):
            assert close(la.vl_congestion[vl], lb.vl_congestion[vl]), (key, vl)
        compared += 1
    assert compared >= len(a.links) - 4
