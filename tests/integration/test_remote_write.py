"""Scaling past one Prometheus: two shards remote-write into a real VictoriaMetrics, and PromQL reads it.

The simulated cluster of test_stack_end_to_end is scraped by two Prometheus servers, sharded as README
"Past one Prometheus" describes: shard `a` scrapes the `hi` nodes, the fabric and the scheduler; shard `b`
only the `lo` nodes. Both load alerts/recording_rules.yml and remote-write with `external_labels`
{cluster, shard}. VictoriaMetrics must then answer for the whole cluster: every node's series, both
shards' recording rules (shard `b` gets per-pool utilization from the node targets' `pool` label), and
the recommender's Prometheus source reading from it.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from recommender.signals.prometheus import PrometheusSettings, PrometheusSource
from simulator.backends import victoria_metrics
from simulator.backends.victoria_metrics import VICTORIA_METRICS, VictoriaMetrics
from tests.integration import prometheus_server
from tests.integration.processes import wait_until
from tests.integration.prometheus_server import PROMETHEUS
from tests.integration.test_stack_end_to_end import RECORDING_RULES, running_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
    pytest.mark.skipif(VICTORIA_METRICS is None, reason="victoria-metrics is not installed"),
]

HI, LO = {"node0001", "node0005"}, {"node0002", "node0003", "node0006"}

SHARD = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
  external_labels: {{cluster: lab, shard: {shard}}}
remote_write:
  - url: http://127.0.0.1:{vm}/api/v1/write
    queue_config: {{batch_send_deadline: 1s}}
scrape_configs:
  - job_name: ibpool-node
    http_sd_configs: [{{url: "http://127.0.0.1:{port}/targets?pool={pool}", refresh_interval: 2s}}]
    relabel_configs:
      - {{source_labels: [__address__, node], separator: /, target_label: instance}}
"""
SHARD_A_EXTRA = """
  - job_name: ibpool-fabric
    metrics_path: /fabric/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
  - job_name: ibpool-scheduler
    metrics_path: /scheduler/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
"""


def labels_in(vm: VictoriaMetrics, expr: str, *names: str) -> set[tuple[str, ...]]:
    return {tuple(s["metric"].get(n, "") for n in names) for s in vm.query(expr)}


def wait_in_vm(
    vm: VictoriaMetrics, expr: str, names: tuple[str, ...], expected: set[tuple[str, ...]]
) -> None:
    wait_until(lambda: labels_in(vm, expr, *names) == expected, 60.0, f"{expr} by {names} == {expected}")


def test_two_shards_remote_write_one_store_that_answers_promql(tmp_path: Path) -> None:
    with ExitStack() as stack:
        vm = stack.enter_context(
            victoria_metrics.running(tmp_path / "vm", extra_args=["-search.disableCache"])
        )
        cluster = stack.enter_context(running_cluster(tmp_path / "cluster", speed=1.0))
        shards = {}
        for shard, pool, extra in (("a", "hi", SHARD_A_EXTRA), ("b", "lo", "")):
            config = (SHARD + extra).format(shard=shard, pool=pool, vm=vm.port, port=cluster.port)
            workdir = tmp_path / f"prometheus-{shard}"
            workdir.mkdir()
            shards[shard] = stack.enter_context(
                prometheus_server.running(config, [RECORDING_RULES], workdir=workdir)
            )
        shards["a"].wait_for_targets(up=len(HI) + 2)
        shards["b"].wait_for_targets(up=len(LO))

        # Every node, whichever shard scraped it, with the shard's external labels.
        expected_nodes: set[tuple[str, ...]] = {(n, "lab", "a") for n in HI} | {(n, "lab", "b") for n in LO}
        wait_in_vm(
            vm, "max by (node, cluster, shard) (ibpool_gpu_up)", ("node", "cluster", "shard"), expected_nodes
        )
        # Recording rules of both shards: per-pool utilization from the scheduler join (a) and from the
        # node targets' pool label (b); the scheduler's pools from shard a only.
        wait_in_vm(
            vm, "pool:ibpool_gpu_utilization_ratio:avg", ("pool", "cluster", "shard"),
            {("hi", "lab", "a"), ("lo", "lab", "b")},
        )  # fmt: skip
        wait_in_vm(vm, "pool:ibpool_pool_pending_gpus:sum", ("pool", "shard"), {("hi", "a"), ("lo", "a")})
        # What VictoriaMetrics holds equals what the scraping shard holds.
        at = time.time() - 2  # a moment both hold: shard a has scraped it, its remote write has sent it
        wait_until(
            lambda: bool(vm.query("ibpool_pool_capacity_gpus", time.time() - 1)), 30.0, "the scheduler"
        )
        vm.flush()
        for expr in ("ibpool_pool_capacity_gpus", "ibpool_pool_allocated_gpus", "ibpool_pool_pending_gpus"):
            in_prometheus = {s["metric"]["pool"]: s["value"][1] for s in shards["a"].query(expr, at)}
            in_vm = {s["metric"]["pool"]: s["value"][1] for s in vm.query(expr, at)}
            assert in_vm == in_prometheus and set(in_vm) == {"hi", "lo"}, expr

        # The recommender reads the whole cluster through VictoriaMetrics's PromQL API.
        def read() -> bool:
            signals = PrometheusSource(PrometheusSettings(vm.url), None).fetch()
            pools_ok = set(signals.pools) == {"hi", "lo"} and all(
                p.utilization is not None for p in signals.pools.values()
            )
            return pools_ok and set(signals.nodes) >= HI | LO

        wait_until(read, 60.0, "the recommender's Prometheus source to read both pools and every node")
        signals = PrometheusSource(PrometheusSettings(vm.url), None).fetch()
        assert signals.pools["hi"].capacity_gpus == 16 and signals.pools["lo"].capacity_gpus == 24
        assert {n for n, s in signals.nodes.items() if s.gpu_utilization is not None} >= HI | LO
