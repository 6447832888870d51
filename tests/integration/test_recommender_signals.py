"""Contract: PrometheusSource (PromQL over the recording rules) and EmbeddedSource agree on one cluster.

The simulated cluster server runs in-process at real time (two long chatty jobs: steady rates); a real
Prometheus scrapes it every second and evaluates a copy of alerts/recording_rules.yml whose rate windows
are RATE_WINDOW_SECONDS instead of 5m (`short_window_rules`). The test waits for the event a rate needs,
never a fixed time: every target scraped over a whole window, then every rule group evaluated once more.
Counts and labels must agree exactly, rates within the tolerances beside their constants. The forwarding
tables the server serves (the model's routes) read the same through both, complete, so both put pools on
switch ports by the routes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from recommender.signals import queries
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from recommender.signals.model import Signals
from recommender.signals.prometheus import PrometheusSettings, PrometheusSource
from recommender.signals.raw import add_route
from recommender.signals.routes import traced
from recommender.signals.scrape import Scrape, add_fabric
from simulator.cluster import scenarios
from simulator.cluster.model import ClusterModel
from simulator.cluster.routing import forwarding
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.qos_reader import SimulatorQos
from tests.integration import prometheus_server
from tests.integration.processes import http_get
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
TARGETS = 10  # eight nodes, the fabric and the scheduler
# Counts and labels compare exactly; GPU utilization within UTIL_ABS; rate-derived ratios (congestion,
# utilization, per-VL waits) within RATIO_ABS + RATIO_REL of the larger: Prometheus extrapolates a rate over
# 1 s scrapes, the embedded source takes a delta over its own 5 s window.
RATIO_ABS, RATIO_REL, UTIL_ABS = 0.05, 0.10, 0.05
# Prometheus stamps samples with its own clock, so a 5m rate reads right only after 5 minutes of wall time,
# which no simulated clock can shorten: the test's copy of the rules rates over this window instead.
RATE_WINDOW_SECONDS = 15  # every scrape and evaluation is 1 s apart: 15 samples per window
RULES_WINDOW = "[5m]"  # the only range the rate rules use


def short_window_rules(target: Path) -> Path:
    """A copy of recording_rules.yml whose `[5m]` ranges are RATE_WINDOW_SECONDS; nothing else changes.

    Checked: the copy has the same groups and rules in the same order, every rule the Prometheus source
    reads a `:ratio_rate5m` of still takes a rate over the (shorter) window, and every expression equals
    the original with only the range replaced (the `[1d]` of the expected-rate rule stays).
    """
    original = RULES.read_text(encoding="utf-8")
    window = f"[{RATE_WINDOW_SECONDS}s]"
    text = original.replace(RULES_WINDOW, window)
    before, after = yaml.safe_load(original), yaml.safe_load(text)
    rules_before = [r for g in before["groups"] for r in g["rules"]]
    rules_after = [r for g in after["groups"] for r in g["rules"]]
    assert [g["name"] for g in before["groups"]] == [g["name"] for g in after["groups"]]
    rated = [r["record"] for r in rules_after if window in r["expr"]]
    assert rated and all(r["record"] in rated for r in rules_before if r["record"].endswith(":ratio_rate5m"))
    for old, new in zip(rules_before, rules_after, strict=True):
        assert {k: v for k, v in old.items() if k != "expr"} == {k: v for k, v in new.items() if k != "expr"}
        assert new["expr"] == old["expr"].replace(RULES_WINDOW, window) and RULES_WINDOW not in new["expr"]
    target.write_text(text, encoding="utf-8")
    return target


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= RATIO_ABS + RATIO_REL * max(abs(a), abs(b))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterServer]:
    model = ClusterModel(scenarios.shared_uplink_spec(), [scenarios.chatty("hi"), scenarios.chatty("lo")])
    model.advance(10.0)
    work = tmp_path_factory.mktemp("cluster")
    # The clock moves in 0.1 s steps (not 0.5 s): a counter read mid-step is off by at most 2 % of the
    # embedded source's 5 s window.
    settings = ServerSettings(listen_address="127.0.0.1:0", speed=1.0, step_seconds=0.1, workdir=work)
    server = ClusterServer(model, settings)
    server.start()
    yield server
    server.close()


def test_both_sources_agree(cluster: ClusterServer, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{cluster.port}"
    rules = short_window_rules(tmp_path / "recording_rules_short_window.yml")
    with prometheus_server.running(CONFIG.format(port=cluster.port), rule_files=[rules]) as prom:
        prom.wait_for_targets(up=TARGETS)
        prom.wait_for_query("port:ibpool_infiniband_transmit_utilization:ratio_rate5m", lambda r: len(r) >= 4)
        prom.wait_for_query("port:ibpool_infiniband_congestion:ratio_rate5m", lambda r: len(r) >= 4)
        prom.wait_for_query("pool:ibpool_gpu_utilization_ratio:avg", lambda r: len(r) == 2)
        # A rate divides by its whole range: it reads right once every target has samples over all of it
        # (RATE_WINDOW_SECONDS + 1 scrapes a second apart span the window), and the rules ran after that.
        span = RATE_WINDOW_SECONDS + 1
        prom.wait_for_query(
            f"count_over_time(up[{span + 2}s]) >= {span}", lambda r: len(r) == TARGETS, timeout=span + 60
        )
        prom.wait_for_rule_evaluations(1)
        # The reads usually come about 40 s into the model, before the shared uplinks' 32-bit wait counters
        # fill (at about 50 s), so their congestion (about 0.44) is compared too, not only idle ports (a
        # filled counter reads as saturated, with no congestion, in both sources).
        qos = SimulatorQos(f"{base}/-/model")
        embedded = EmbeddedSource(EmbeddedSettings(f"{base}/targets", window_seconds=5.0), qos).fetch()
        promql = PrometheusSource(PrometheusSettings(prom.url), qos).fetch()
        in_prometheus: dict[tuple[str, str], tuple[str, ...]] = {}
        for series in prom.query(queries.FABRIC_ROUTES):
            labels = series["metric"]
            assert add_route(
                in_prometheus, labels["node_guid"], labels["port"], labels.get("destinations", "")
            )
    compare(embedded, promql)
    scrape = Scrape()
    add_fabric(scrape, http_get(cluster.port, "/fabric/metrics")[1].decode(), 0.0)
    with cluster.runner.locked() as model:
        routed = forwarding(model.topology, model.fabric.link_up)
    assert in_prometheus == scrape.routes == routed and not scrape.routes_unreadable
    assert traced(scrape.links, scrape.switches, scrape.routes).complete  # both sources trace the routes


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
        if la.saturated != lb.saturated:  # its counter saturated between the two reads
            continue
        assert close(la.congestion, lb.congestion), (key, la.congestion, lb.congestion)
        assert close(la.utilization, lb.utilization), (key, la.utilization, lb.utilization)
        for vl in set(la.vl_congestion) & set(lb.vl_congestion):
            assert close(la.vl_congestion[vl], lb.vl_congestion[vl]), (key, vl)
        compared += 1
    assert compared >= len(a.links) - 4
