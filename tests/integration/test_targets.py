"""`ibpool targets` on a real Slurm, loaded by a real Prometheus with the shipped scrape config and rules.

Three nodes with four fake GPUs each, each with its own loopback address, the shipped prolog and epilog
installed; on each node's address a simulated node exporter reads that node's job map, and the real
scheduler exporter polls Slurm. `ibpool targets --targets.address hostname` writes the file_sd list that
Prometheus runs deploy/prometheus/prometheus-slurm.yml on, with both rule files. The node targets must
carry node, pool and cluster, and the pool rules must give per-pool series, also for a real job's GPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration import prometheus_server
from tests.integration.processes import REPO, free_port, ibpool_argv, start_http_program, stop, wait_until
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer
from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason

SKIP_REASON = slurm_skip_reason() or (
    None if PROMETHEUS else "prometheus is not installed (Debian: prometheus)"
)
pytestmark = [pytest.mark.integration, pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")]

SHIPPED_CONFIG = REPO / "deploy" / "prometheus" / "prometheus-slurm.yml"
RULES = [REPO / "alerts" / "recording_rules.yml", REPO / "alerts" / "alert_rules.yml"]
GPUS = 4
# node3 is in two partitions: its target's `pool` is `debug,inference`, and a job in `debug` arrives as
# `exported_pool`, which the pool rules must read.
PARTITIONS = {"training": ["node1", "node2"], "inference": ["node3"], "debug": ["node3"]}


def run_targets(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": str(cluster.conf_path)}
    return subprocess.run(
        ibpool_argv("targets", *args), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def local_config(cluster: SlurmCluster, targets_file: Path, scheduler_port: int) -> str:
    """The shipped Prometheus config, pointed at this cluster and scraping and evaluating every second.

    Its hosts, ports and cluster name point here; the fabric and recommender jobs are dropped (not run).
    """
    config: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    config["global"]["external_labels"]["cluster"] = cluster.cluster_name
    for key in ("rule_files", "alerting"):
        config.pop(key)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    jobs["ibpool-node"]["file_sd_configs"][0]["files"] = [str(targets_file)]
    (scheduler,) = jobs["ibpool-scheduler"]["static_configs"]
    scheduler.update(targets=[f"127.0.0.1:{scheduler_port}"], labels={"cluster": cluster.cluster_name})
    jobs["ibpool-scheduler"]["scrape_timeout"] = "1s"
    config["scrape_configs"] = [jobs["ibpool-node"], jobs["ibpool-scheduler"]]
    return yaml.safe_dump(config, sort_keys=False)


def start_on(address: str, port: int, argv: list[str]) -> subprocess.Popen[bytes]:
    """Start `argv`, which listens on address:port, and wait until it answers there."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def answers() -> bool:
        assert proc.poll() is None, f"{argv[2:4]} exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(f"http://{address}:{port}/metrics", timeout=2):
                return True
        except OSError:
            return False

    try:
        wait_until(answers, 30.0, f"{address}:{port} to answer")
    except BaseException:
        stop(proc)
        raise
    return proc


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SlurmCluster, int, int]]:
    """The Slurm cluster, one simulated node exporter per node on port P of its address, the scheduler
    exporter: (cluster, P, scheduler exporter port)."""
    with ExitStack() as stack:
        slurm = stack.enter_context(
            SlurmCluster(
                tmp_path / "slurm", nodes=3, partitions=PARTITIONS, gpus_per_node=GPUS,
                job_mapping=True, distinct_hostnames=True,
            )
        )  # fmt: skip
        port = free_port()
        for node in slurm.node_names:
            address = slurm.node_hostname(node)
            argv = ibpool_argv(
                "exporter", "--simulate", "--simulate.gpus", str(GPUS), "--simulate.ports", "1",
                "--jobs.directory", str(slurm.job_map_directory(node)),
                "--web.listen-address", f"{address}:{port}",
            )  # fmt: skip
            stack.callback(stop, start_on(address, port, argv))
        scheduler_port = free_port()
        argv = ibpool_argv(
            "scheduler-exporter", "--slurm.conf", str(slurm.conf_path),
            "--slurm.poll-interval-seconds", "1", "--web.listen-address", f"127.0.0.1:{scheduler_port}",
        )  # fmt: skip
        stack.callback(stop, start_http_program(argv, scheduler_port))
        yield slurm, port, scheduler_port


def pools(prom: PrometheusServer, rule: str) -> dict[tuple[str, str], float]:
    return {(s["metric"]["cluster"], s["metric"]["pool"]): float(s["value"][1]) for s in prom.query(rule)}


def test_targets_from_slurm_feed_prometheus_and_the_pool_rules(
    tmp_path: Path, cluster: tuple[SlurmCluster, int, int]
) -> None:
    slurm, port, scheduler_port = cluster
    name = slurm.cluster_name
    targets_file = tmp_path / "nodes.json"
    args = ["--output.file", str(targets_file), "--targets.port", str(port), "--targets.address", "hostname"]
    proc = run_targets(slurm, *args)
    assert proc.returncode == 0, proc.stderr
    groups = json.loads(targets_file.read_text())
    assert groups == [
        {
            "targets": [f"{slurm.node_hostname(node)}:{port}"],
            "labels": {"node": node, "instance": node, "pool": pool, "cluster": name},
        }
        for node, pool in (("node1", "training"), ("node2", "training"), ("node3", "debug,inference"))
    ]

    job = slurm.submit("debug", gpus_per_node=2)
    slurm.wait_job_state(job, "RUNNING")
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    with prometheus_server.running(
        local_config(slurm, targets_file, scheduler_port), RULES, workdir=workdir
    ) as prom:
        targets = prom.wait_for_targets(up=4)
        nodes = {t["labels"]["node"]: t["labels"] for t in targets if t["labels"]["job"] == "ibpool-node"}
        assert {n: (labels["pool"], labels["cluster"]) for n, labels in nodes.items()} == {
            "node1": ("training", name),
            "node2": ("training", name),
            "node3": ("debug,inference", name),
        }

        every_pool = {(name, "training"), (name, "inference"), (name, "debug")}
        prom.wait_for_query("pool:ibpool_gpu_utilization_ratio:avg", lambda r: len(r) == 3)
        assert set(pools(prom, "pool:ibpool_gpu_utilization_ratio:avg")) == every_pool
        prom.wait_for_query("pool:ibpool_pool_idle_gpus:sum", lambda r: len(r) == 3)
        idle = pools(prom, "pool:ibpool_pool_idle_gpus:sum")
        # the scheduler exporter counts a job's GPUs in the partition it runs in
        assert idle == {(name, "training"): 8.0, (name, "inference"): 4.0, (name, "debug"): 2.0}

        # The job's two GPUs on node3: its pool arrives as exported_pool and the rule reads it.
        info = prom.wait_for_query("ibpool_gpu_job_info")
        assert {(s["metric"]["exported_job"], s["metric"]["exported_pool"]) for s in info} == {
            (str(job), "debug")
        }
        prom.wait_for_query("pool:ibpool_gpu_utilization_ratio:avg_allocated")
        assert set(pools(prom, "pool:ibpool_gpu_utilization_ratio:avg_allocated")) == {(name, "debug")}
