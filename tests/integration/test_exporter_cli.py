"""`ibpool exporter` as an operator runs it: a real process over HTTP, with node_exporter and promtool."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simulator.sysfs_tree import SysfsTree, dgx_hcas
from tests.helpers import SYSFS_FIXTURES
from tests.integration.processes import free_port, http_get, ibpool_argv, start_http_program, stop, wait_until

pytestmark = pytest.mark.integration

FIXTURES = SYSFS_FIXTURES
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")


def _samples(text: str, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(prefix):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _promtool_errors(text: str) -> list[str]:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30, check=False
    )
    lines = (result.stdout + result.stderr).decode().splitlines()
    # Two names fixed by docs/architecture.md contain the word "counter"; promtool's linter notes them.
    return [line for line in lines if line.strip() and "should not include type" not in line]


@pytest.mark.skipif(NODE_EXPORTER is None, reason="prometheus-node-exporter is not installed")
def test_every_node_exporter_sample_has_a_twin_over_http() -> None:
    assert NODE_EXPORTER is not None
    ours_port, theirs_port = free_port(), free_port()
    ours = start_http_program(
        ibpool_argv(
            "exporter",
            "--sysfs-root",
            str(FIXTURES),
            "--no-collector.gpu",
            "--web.listen-address",
            f"127.0.0.1:{ours_port}",
        ),
        ours_port,
    )
    theirs = start_http_program(
        [
            NODE_EXPORTER,
            f"--web.listen-address=127.0.0.1:{theirs_port}",
            f"--path.sysfs={FIXTURES}",
            "--collector.disable-defaults",
            "--collector.infiniband",
        ],
        theirs_port,
    )
    try:
        ours_text = http_get(ours_port, "/metrics")[1].decode()
        theirs_text = http_get(theirs_port, "/metrics")[1].decode()
    finally:
        stop(ours)
        stop(theirs)
    reference = _samples(theirs_text, "node_infiniband_")
    mine = _samples(ours_text, "ibpool_infiniband_")
    assert len(reference) >= 87  # 3 devices, 4 ports on the captures
    missing = {
        (name, labels): value
        for (name, labels), value in reference.items()
        if mine.get((name.replace("node_", "ibpool_", 1), labels)) != value
    }
    assert missing == {}
    assert "N/A" not in ours_text
    if PROMTOOL:
        assert _promtool_errors(ours_text) == []


@pytest.fixture
def simulated() -> Iterator[int]:
    port = free_port()
    proc = start_http_program(
        ibpool_argv(
            "exporter",
            "--simulate",
            "--simulate.step-seconds",
            "0.2",
            "--gpu.deadline-seconds",
            "0.5",
            "--health.max-age-seconds",
            "0.1",
            "--web.listen-address",
            f"127.0.0.1:{port}",
        ),
        port,
    )
    yield port
    assert stop(proc) == 0  # SIGTERM is a clean shutdown


def _metrics(port: int) -> str:
    status, body = http_get(port, "/metrics")
    assert status == 200
    return body.decode()


def _fault(port: int, query: str) -> int:
    return http_get(port, f"/-/simulate/fault?{query}", method="POST")[0]


def _value(text: str, name: str, **labels: str) -> float | None:
    for (sample_name, sample_labels), value in _samples(text, name).items():
        if sample_name == name and all(dict(sample_labels).get(k) == v for k, v in labels.items()):
            return value
    return None


def test_simulated_node_serves_every_metric_and_faults_show_up(simulated: int) -> None:
    port = simulated

    def sampled() -> bool:  # GPM needs two reads, utilization needs NVML's first samples (1/6 s)
        text = _metrics(port)
        return all(
            _value(text, f"ibpool_gpu_{m}_ratio", gpu="0") is not None for m in ("sm_active", "utilization")
        )

    wait_until(sampled, what="GPM and utilization samples")
    text = _metrics(port)
    for name in (
        "ibpool_gpu_utilization_ratio",
        "ibpool_gpu_power_watts",
        "ibpool_gpu_energy_joules_total",
        "ibpool_gpu_tensor_active_ratio",
        "ibpool_infiniband_port_data_transmitted_bytes_total",
        "ibpool_infiniband_port_info",
        "ibpool_infiniband_link_width_lanes",
        "ibpool_build_info",
    ):
        assert _value(text, name) is not None, name
    assert _value(text, "ibpool_infiniband_rate_bytes_per_second", device="mlx5_0") == 50e9
    assert _value(text, "ibpool_infiniband_link_width_lanes", device="mlx5_0") == 4
    if PROMTOOL:
        assert _promtool_errors(text) == []
    before = _value(text, "ibpool_infiniband_port_data_transmitted_bytes_total", device="mlx5_3") or 0
    wait_until(
        lambda: (
            (
                _value(_metrics(port), "ibpool_infiniband_port_data_transmitted_bytes_total", device="mlx5_3")
                or 0
            )
            >= before
        ),
        what="counters to keep going up",
    )

    assert _fault(port, "kind=lose_gpu&gpu=5") == 200
    assert _fault(port, "kind=xid&gpu=2&value=79") == 200
    assert _fault(port, "kind=link_down&port=3") == 200
    assert _fault(port, "kind=saturate&port=1") == 200
    assert _fault(port, "kind=meteor") == 400
    wait_until(
        lambda: _value(_metrics(port), "ibpool_gpu_xid_errors_total", gpu="2", xid="79") == 1,
        what="the XID to be counted",
    )
    wait_until(lambda: _value(_metrics(port), "ibpool_gpu_up", gpu="5") == 0, what="the next read of GPU 5")
    text = _metrics(port)
    assert _value(text, "ibpool_gpu_up", gpu="5") == 0
    assert _value(text, "ibpool_gpu_up", gpu="4") == 1
    assert _value(text, "ibpool_gpu_utilization_ratio", gpu="5") is None
    assert _value(text, "ibpool_infiniband_state_id", device="mlx5_3") == 1
    assert _value(text, "ibpool_infiniband_counter_saturated", device="mlx5_1", counter="port_xmit_wait") == 1
    status, body = http_get(port, "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_a_hung_nvml_call_turns_health_red_without_hanging_metrics(simulated: int) -> None:
    port = simulated
    _metrics(port)
    assert _fault(port, "kind=hang_nvml&value=3") == 200  # the next field read, on whichever GPU, hangs 3 s

    def some_gpu_stale() -> bool:
        stale = _samples(_metrics(port), "ibpool_gpu_sample_stale")
        return any(value == 1 for value in stale.values())

    wait_until(some_gpu_stale, what="the hung GPU to be reported stale")
    text = _metrics(port)  # answers while NVML hangs: the collector serves its snapshots
    assert _value(text, "ibpool_exporter_collector_success", collector="gpu") == 1
    assert _value(text, "ibpool_infiniband_state_id", device="mlx5_0") == 4
    status, body = http_get(port, "/healthz")
    assert status == 503
    assert any("stuck" in reason for reason in json.loads(body)["reasons"])
    wait_until(lambda: http_get(port, "/healthz")[0] == 200, timeout=20, what="health to recover")


def test_a_stalled_gpu_does_not_stall_the_scrape(simulated: int) -> None:
    port = simulated
    _metrics(port)
    assert _fault(port, "kind=stall_gpu&gpu=3&value=30") == 200  # every call on GPU 3 blocks for 30 s
    wait_until(
        lambda: _value(_metrics(port), "ibpool_gpu_sample_stale", gpu="3") == 1,
        what="GPU 3 to be reported stale",
    )
    text = _metrics(port)  # the stall lasts: still answered, GPU 3 stale, the others fresh
    stale = {dict(labels)["gpu"]: v for (_, labels), v in _samples(text, "ibpool_gpu_sample_stale").items()}
    up = {dict(labels)["gpu"]: v for (_, labels), v in _samples(text, "ibpool_gpu_up").items()}
    assert stale == {str(i): float(i == 3) for i in range(8)}
    assert up == {str(i): float(i != 3) for i in range(8)}
    assert _value(text, "ibpool_gpu_power_watts", gpu="3") is None
    assert _value(text, "ibpool_gpu_power_watts", gpu="2") is not None
    ages = _samples(text, "ibpool_gpu_sample_age_seconds")
    assert {dict(labels)["gpu"] for _, labels in ages} == {str(i) for i in range(8)}  # each says how old
    assert _value(text, "process_resident_memory_bytes") is not None


def test_no_gpu_driver_means_a_failed_gpu_collector_not_a_dead_exporter() -> None:
    port = free_port()
    proc = start_http_program(
        ibpool_argv("exporter", "--sysfs-root", str(FIXTURES), "--web.listen-address", f"127.0.0.1:{port}"),
        port,
    )
    try:
        text = _metrics(port)
        status, body = http_get(port, "/healthz")
    finally:
        stop(proc)
    assert _value(text, "ibpool_exporter_collector_success", collector="gpu") == 0
    assert _value(text, "ibpool_exporter_collector_success", collector="infiniband") == 1
    assert status == 503 and "collector gpu failing" in body.decode()


def test_a_fifo_in_the_sysfs_tree_never_wedges_metrics_or_health(tmp_path: Path) -> None:
    """Issue 21: a counter file replaced by a FIFO hung every /metrics and /healthz for good."""
    tree = SysfsTree(tmp_path / "sys", dgx_hcas(2))
    port = free_port()
    proc = start_http_program(
        ibpool_argv(
            "exporter",
            "--sysfs-root",
            str(tmp_path / "sys"),
            "--no-collector.gpu",
            "--no-collector.verbs",
            "--no-collector.jobs",
            "--web.listen-address",
            f"127.0.0.1:{port}",
        ),
        port,
    )
    symbol_errors = "ibpool_infiniband_symbol_error_total"

    def scrape() -> str:
        status, body = http_get(port, "/metrics", timeout=60)  # generous: the old exporter never answered
        assert status == 200
        return body.decode()

    try:
        assert _value(scrape(), symbol_errors, device="mlx5_0") == 0
        counter = Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error")
        counter.unlink()
        os.mkfifo(counter)
        text = scrape()
        assert _value(text, symbol_errors, device="mlx5_0") is None
        assert _value(text, symbol_errors, device="mlx5_1") == 0
        assert (_value(text, "ibpool_exporter_sysfs_read_errors_total", reason="not_a_file") or 0) >= 1
        assert _value(text, "ibpool_exporter_collector_success", collector="infiniband") == 1
        status, body = http_get(port, "/healthz", timeout=60)
        assert status == 200 and json.loads(body)["status"] == "ok"

        counter.unlink()
        tree.add_errors("mlx5_0", 1, symbol_error=3)
        wait_until(lambda: _value(scrape(), symbol_errors, device="mlx5_0") == 3, what="the value back")
        assert http_get(port, "/healthz", timeout=60)[0] == 200
    finally:
        assert stop(proc) == 0
