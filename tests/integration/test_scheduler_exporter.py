"""The scheduler exporter against a real Slurm 22.05: eight `slurmd -N nodeK`, two partitions, fake GPUs.

Jobs are submitted until some pend and nodes are put in every state of interest; the pool metrics must
match exactly. Then slurmctld is stopped: the exporter must say the scheduler is down and serve no pool
series, and recover when slurmctld is back. One test runs `main` in a subprocess, scrapes /metrics over
HTTP and checks it with `promtool check metrics`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.scheduler.collector import SchedulerCollector, SchedulerStatusCollector
from exporter.scheduler.config import SchedulerExporterConfig
from exporter.scheduler.main import build_poller
from exporter.scheduler.poller import SchedulerPoller
from foundation.exposition import render
from foundation.registry import Registry
from tests.integration.processes import free_port, http_get, start_http_program, stop, wait_until
from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason

pytestmark = pytest.mark.integration
SKIP_REASON = slurm_skip_reason()
requires_slurm = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")
PROMTOOL = shutil.which("promtool")

TRAINING = ["node1", "node2", "node3", "node4"]
INFERENCE = ["node5", "node6", "node7", "node8"]
# metric -> {labels: value}; labels as sorted (name, value) pairs.
Values = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _pools(**per_pool: float) -> dict[tuple[tuple[str, str], ...], float]:
    return {(("pool", pool),): value for pool, value in per_pool.items()}


# What build_scenario leaves behind (see its docstring for the jobs).
EXPECTED: Values = {
    "ibpool_pool_capacity_gpus": _pools(training=32, inference=32),
    "ibpool_pool_allocated_gpus": _pools(training=16 + 3, inference=2 + 0),
    "ibpool_pool_running_jobs": _pools(training=2, inference=2),
    "ibpool_pool_pending_jobs": _pools(training=1 + 1 + 4, inference=1 + 1),
    "ibpool_pool_pending_gpus": _pools(training=16 + 32 + 4 * 2, inference=32 + 4),
    "ibpool_pool_node_info": {
        **{(("node", n), ("pool", "training")): 1 for n in TRAINING},
        **{(("node", n), ("pool", "inference")): 1 for n in INFERENCE},
    },
    "ibpool_node_state_info": {
        (("node", node), ("state", state)): 1
        for node, state in {
            "node1": "allocated",
            "node2": "allocated",
            "node3": "mixed",
            "node4": "idle",
            "node5": "draining",
            "node6": "fail",
            "node7": "down",
            "node8": "drained",
        }.items()
    },
}
POOL_METRICS = tuple(EXPECTED)


def build_scenario(cluster: SlurmCluster) -> dict[str, int]:
    """Submit the jobs and set the node states that EXPECTED describes; returns job ids by letter.

    Running: a (training, node1-2, 8 GPUs each, exclusive), b (training, node3, 3 GPUs),
    d (inference, node5, `--gpus=2`), e (inference, node5, no GPU). Pending: c (training, 2 nodes x 8),
    f (training and inference, 4 nodes x 8), g (inference, `--gpus=4`, held), h (training, array of 4
    tasks x 2 GPUs, held). Nodes: node5 drained while busy, node6 failed, node7 down, node8 drained.
    """
    jobs = {
        "a": cluster.submit(
            "training", nodes=2, gpus_per_node=8, nodelist=["node1", "node2"], exclusive=True
        ),
        "b": cluster.submit("training", gpus_per_node=3, nodelist=["node3"]),
        "d": cluster.submit("inference", gpus=2, nodelist=["node5"]),
        "e": cluster.submit("inference", nodelist=["node5"]),
    }
    wait_until(
        lambda: all(cluster.job_states().get(job) == "RUNNING" for job in jobs.values()),
        60,
        "jobs a, b, d, e to run",
    )
    # Submitted only now, so that none of them can start before the running set is placed.
    jobs["c"] = cluster.submit("training", nodes=2, gpus_per_node=8)
    jobs["f"] = cluster.submit(["training", "inference"], nodes=4, gpus_per_node=8)
    jobs["g"] = cluster.submit("inference", gpus=4, hold=True)
    jobs["h"] = cluster.submit("training", gpus_per_node=2, hold=True, array="0-3")
    cluster.set_node_state(["node5", "node8"], "DRAIN")
    cluster.set_node_state(["node6"], "FAIL")
    cluster.set_node_state(["node7"], "DOWN")
    want = {"node5": "draining", "node6": "fail", "node7": "down", "node8": "drained"}
    wait_until(
        lambda: all(cluster.node_states().get(n) == s for n, s in want.items()),
        30,
        "node states",
    )
    return jobs


def build_whole_node_scenario(cluster: SlurmCluster) -> None:
    """No GRES; pools a (node1-2) and b (node3-4). Two jobs share node1, one job takes b, one pends in a."""
    running = [
        cluster.submit("a", nodelist=["node1"]),
        cluster.submit("a", nodelist=["node1"]),
        cluster.submit("b", nodes=2, exclusive=True),
    ]
    wait_until(
        lambda: all(cluster.job_states().get(job) == "RUNNING" for job in running),
        60,
        "the running jobs",
    )
    pending = cluster.submit("a", nodes=2, exclusive=True)
    cluster.wait_job_state(pending, "PENDING")


def values_of(text: str, names: tuple[str, ...] = POOL_METRICS) -> Values:
    """The samples of `names` in an exposition (a name with no sample maps to an empty dict)."""
    out: Values = {name: {} for name in names}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in out:
                out[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return out


def scalar(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample, or None when absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def exporter_config(cluster: SlurmCluster, gpus_per_node: int | None = None) -> SchedulerExporterConfig:
    return SchedulerExporterConfig(
        slurm_conf=cluster.conf_path,
        poll_interval_seconds=0.2,
        timeout_seconds=3.0,
        max_age_seconds=30.0,
        gpus_per_node=gpus_per_node,
    )


def scrape_registry(poller: SchedulerPoller, max_age: float = 30.0) -> str:
    registry = Registry([SchedulerCollector(poller, max_age), SchedulerStatusCollector(poller, max_age)])
    try:
        return render(registry.collect())
    finally:
        registry.close()


@pytest.fixture(scope="module")
def gres_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Eight nodes with eight fake GPUs each, partitions training and inference, build_scenario applied."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    cluster = SlurmCluster(
        tmp_path_factory.mktemp("slurm-gres"),
        nodes=8,
        partitions={"training": TRAINING, "inference": INFERENCE},
        gpus_per_node=8,
    )
    cluster.start()
    try:
        build_scenario(cluster)
        yield cluster
    finally:
        cluster.stop()


@requires_slurm
def test_pool_metrics_match_the_cluster_exactly(gres_cluster: SlurmCluster) -> None:
    poller = build_poller(exporter_config(gres_cluster))
    state = poller.poll_once()
    assert state.ok, state.error
    text = scrape_registry(poller)
    assert values_of(text) == EXPECTED
    assert scalar(text, "ibpool_scheduler_up") == 1
    assert scalar(text, "ibpool_exporter_collector_success", collector="scheduler") == 1
    members = gres_cluster.partition_members()
    assert {name: sorted(nodes) for name, nodes in members.items()} == {
        "training": TRAINING,
        "inference": INFERENCE,
    }


@requires_slurm
@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")
def test_main_serves_the_pools_over_http_and_promtool_accepts_them(gres_cluster: SlurmCluster) -> None:
    assert PROMTOOL is not None
    port = free_port()
    code = "import sys; from exporter.scheduler.main import main; sys.exit(main(sys.argv[1:]))"
    argv = [
        sys.executable,
        "-c",
        code,
        f"--web.listen-address=127.0.0.1:{port}",
        f"--slurm.conf={gres_cluster.conf_path}",
        "--slurm.poll-interval-seconds=0.5",
        "--slurm.timeout-seconds=5",
        "--slurm.max-age-seconds=20",
    ]
    proc = start_http_program(argv, port)
    try:
        text = ""

        def up() -> bool:
            nonlocal text
            status, body = http_get(port, "/metrics")
            text = body.decode()
            return status == 200 and scalar(text, "ibpool_scheduler_up") == 1

        wait_until(up, 60, "the exporter to report ibpool_scheduler_up 1")
        assert values_of(text) == EXPECTED
        assert (scalar(text, "ibpool_scheduler_poll_timestamp_seconds") or 0) > time.time() - 60
        assert http_get(port, "/healthz")[0] == 200
        check = subprocess.run(
            [PROMTOOL, "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        code_at_exit = stop(proc, timeout=30)
    assert code_at_exit == 0


@requires_slurm
def test_scheduler_down_is_reported_and_no_stale_pool_values_are_served(gres_cluster: SlurmCluster) -> None:
    """Stops slurmctld (and starts it again at the end, so this test can run in any order)."""
    poller = build_poller(exporter_config(gres_cluster))
    poller.start()
    try:
        wait_until(lambda: poller.state().ok is True, 30, "a first successful poll")
        before = scrape_registry(poller)
        assert values_of(before)["ibpool_pool_capacity_gpus"] == EXPECTED["ibpool_pool_capacity_gpus"]
        gres_cluster.stop_controller()
        stopped_at = time.time()
        try:
            wait_until(lambda: poller.state().ok is False, 30, "a failed poll")
            down = scrape_registry(poller)
            assert scalar(down, "ibpool_scheduler_up") == 0
            assert scalar(down, "ibpool_exporter_collector_success", collector="scheduler") == 0
            assert scalar(down, "ibpool_exporter_collector_success", collector="scheduler_status") == 1
            assert values_of(down) == {name: {} for name in POOL_METRICS}
            last_success = scalar(down, "ibpool_scheduler_poll_timestamp_seconds")
            assert last_success is not None and last_success <= stopped_at
            assert poller.state().error
        finally:
            gres_cluster.start_controller()
        wait_until(lambda: poller.state().ok is True, 30, "polls to succeed again")
        again = scrape_registry(poller)
        assert scalar(again, "ibpool_scheduler_up") == 1
        assert values_of(again)["ibpool_pool_capacity_gpus"] == EXPECTED["ibpool_pool_capacity_gpus"]
        assert (scalar(again, "ibpool_scheduler_poll_timestamp_seconds") or 0) > stopped_at
    finally:
        poller.stop(timeout=15)


@requires_slurm
def test_whole_nodes_with_configured_gpus_per_node(tmp_path: Path) -> None:
    """Without GRES: capacity and allocation in whole nodes x --slurm.gpus-per-node."""
    cluster = SlurmCluster(tmp_path, nodes=4, partitions={"a": ["node1", "node2"], "b": ["node3", "node4"]})
    cluster.start()
    try:
        build_whole_node_scenario(cluster)
        poller = build_poller(exporter_config(cluster, gpus_per_node=8))
        assert poller.poll_once().ok, poller.state().error
        values = values_of(scrape_registry(poller))
        assert values["ibpool_pool_capacity_gpus"] == _pools(a=16, b=16)
        assert values["ibpool_pool_allocated_gpus"] == _pools(a=8, b=16)  # two jobs share node1: 8, not 16
        assert values["ibpool_pool_pending_gpus"] == _pools(a=16, b=0)
        assert values["ibpool_pool_running_jobs"] == _pools(a=2, b=1)
        assert values["ibpool_pool_pending_jobs"] == _pools(a=1, b=0)
        assert values["ibpool_node_state_info"] == {
            (("node", "node1"), ("state", "mixed")): 1,
            (("node", "node2"), ("state", "idle")): 1,
            (("node", "node3"), ("state", "allocated")): 1,
            (("node", "node4"), ("state", "allocated")): 1,
        }
        unknown = build_poller(exporter_config(cluster))  # no GPUs per node configured: GPU figures omitted
        assert unknown.poll_once().ok
        values = values_of(scrape_registry(unknown))
        assert values["ibpool_pool_capacity_gpus"] == {}
        assert values["ibpool_pool_pending_gpus"] == {}
        assert values["ibpool_pool_running_jobs"] == _pools(a=2, b=1)
    finally:
        cluster.stop()
