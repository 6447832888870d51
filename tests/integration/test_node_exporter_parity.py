"""Parity with the real node_exporter 1.5.0: every node_infiniband_* sample has an ibpool_infiniband_* twin.

node_exporter reads the same tree (`--path.sysfs`); both expositions are parsed with prometheus_client.
Our output must also pass `promtool check metrics` (only the accepted lint notes below).
"""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.collectors.infiniband import InfinibandCollector
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from foundation.exposition import render
from simulator.sysfs_tree import SysfsTree, dgx_hcas
from tests.helpers import SYSFS_FIXTURES

pytestmark = pytest.mark.integration

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")
FIXTURES = SYSFS_FIXTURES
# The contract (docs/architecture.md §4) names these; promtool's lint dislikes "counter" inside a name.
ACCEPTED_LINT = {
    "ibpool_infiniband_counter_saturated metric name should not include type 'counter'",
    "ibpool_infiniband_hw_counter_total metric name should not include type 'counter'",
}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        conn.close()


def scrape_node_exporter(sysfs_root: str) -> str:
    """Start node_exporter on a free port against `sysfs_root`, scrape it once, stop it."""
    assert NODE_EXPORTER is not None
    port = _free_port()
    proc = subprocess.Popen(
        [
            NODE_EXPORTER,
            f"--web.listen-address=127.0.0.1:{port}",
            f"--path.sysfs={sysfs_root}",
            "--collector.disable-defaults",
            "--collector.infiniband",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                return _get(port)
            except (ConnectionError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise AssertionError(f"node_exporter did not answer: {err}") from None
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def ours(sysfs_root: str) -> str:
    collector = InfinibandCollector(InfinibandSysfsSource(sysfs_root))
    try:
        return render(collector.collect())
    finally:
        collector.close()


def parse(text: str, prefix: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(prefix):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def assert_parity(sysfs_root: str) -> int:
    """Every node_infiniband_* sample has a twin with identical labels and value; returns how many."""
    theirs = parse(scrape_node_exporter(sysfs_root), "node_infiniband_")
    mine = parse(ours(sysfs_root), "ibpool_infiniband_")
    assert theirs, "node_exporter exported no infiniband samples"
    problems = []
    for (name, labels), value in sorted(theirs.items()):
        twin = ("ibpool_" + name.removeprefix("node_"), labels)
        if twin not in mine:
            problems.append(f"missing {twin}")
        elif mine[twin] != value:
            problems.append(f"{twin}: ours {mine[twin]!r}, node_exporter {value!r}")
    assert problems == []
    return len(theirs)


@pytest.fixture(scope="module")
def dgx_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SysfsTree]:
    """8 HCAs, counters_ext on mlx5_3, some traffic, a link down, a saturated counter, an N/A counter."""
    tree = SysfsTree(tmp_path_factory.mktemp("dgx"), dgx_hcas(8, counters_ext=["mlx5_3"]), seed=7)
    tree.add_traffic("mlx5_0", 1, tx_bytes=123_456_789_012, rx_bytes=98_765_432_100)
    tree.add_traffic("mlx5_3", 1, tx_bytes=4_000_000_003)
    tree.add_errors("mlx5_4", 1, symbol_error=3, port_rcv_errors=2, link_error_recovery=1)
    tree.add_hw("mlx5_5", 1, np_cnp_sent=10, rp_cnp_handled=9, np_ecn_marked_roce_packets=11)
    tree.set_link("mlx5_2", 1, up=False)
    tree.flap_link("mlx5_6", 1)
    tree.saturate("mlx5_1", 1, "port_xmit_wait")
    tree.write_bad("mlx5_7", 1, "counters/port_rcv_errors", "not_available")
    yield tree


needs_node_exporter = pytest.mark.skipif(
    NODE_EXPORTER is None,
    reason="prometheus-node-exporter is not on PATH (Debian package of that name)",
)
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")


@needs_node_exporter
def test_parity_on_real_fixtures() -> None:
    assert assert_parity(str(FIXTURES)) >= 80


@needs_node_exporter
def test_parity_on_generated_dgx_tree(dgx_tree: SysfsTree) -> None:
    count = assert_parity(dgx_tree.root)
    text = ours(dgx_tree.root)
    assert "ibpool_infiniband_legacy_data_transmitted_bytes_total" in text
    assert 'ibpool_infiniband_counter_saturated{device="mlx5_1",port="1",counter="port_xmit_wait"} 1' in text
    assert 'ibpool_infiniband_port_errors_received_total{device="mlx5_7",port="1"}' not in text
    assert count > 8 * 20


def _promtool_problems(text: str) -> tuple[int, list[str]]:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return result.returncode, lines


@needs_promtool
def test_promtool_accepts_our_output(dgx_tree: SysfsTree) -> None:
    roots = [dgx_tree.root] + ([str(FIXTURES)] if FIXTURES.is_dir() else [])
    for root in roots:
        code, lines = _promtool_problems(ours(root))
        assert code in (0, 3), lines  # 3: lint notes only; 1: the text does not parse
        assert [line for line in lines if line not in ACCEPTED_LINT] == []


@needs_promtool
def test_promtool_still_reports_errors() -> None:
    """The check above would catch a malformed exposition."""
    code, lines = _promtool_problems('ibpool_infiniband_state_id{device="x" 4\n')
    assert code == 1, lines
