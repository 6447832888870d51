"""The simulated node feeds the real collectors: load becomes counters and samples, faults show up."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.collectors.gpu import build_gpu_collector
from exporter.collectors.infiniband import InfinibandCollector
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from foundation.exposition import render
from simulator.fake_nvml import ManualClock
from simulator.node import (
    NDR_BYTES_PER_SECOND,
    WAIT_TICK_BYTES,
    FaultError,
    GpuLoad,
    NodeLoad,
    PortLoad,
    SimulatedNode,
    StandaloneWorkload,
)
from tests.helpers import samples_of


@pytest.fixture
def node(tmp_path: Path) -> SimulatedNode:
    return SimulatedNode(tmp_path, gpus=2, ports=2, clock=ManualClock())


class Exporter:
    """The real IB and GPU collectors, kept across scrapes as the exporter keeps them."""

    def __init__(self, node: SimulatedNode) -> None:
        self.ib = InfinibandCollector(InfinibandSysfsSource(node.sysfs_root))
        self.gpu = build_gpu_collector(node.nvml)

    def scrape(self) -> str:
        return render(self.ib.collect() + self.gpu.collect())

    def close(self) -> None:
        self.ib.close()
        self.gpu.close()


def test_port_load_becomes_bytes_and_wait_ticks(node: SimulatedNode) -> None:
    exporter = Exporter(node)
    half = 0.5 * NDR_BYTES_PER_SECOND
    key = (("device", "mlx5_0"), ("port", "1"))
    names = (
        "port_data_transmitted_bytes_total",
        "port_data_received_bytes_total",
        "port_transmit_wait_total",
    )
    before = {n: samples_of(exporter.scrape(), f"ibpool_infiniband_{n}")[key] for n in names}
    node.advance(10.0, NodeLoad((GpuLoad(utilization=0.9),), (PortLoad(half, half / 2, wait_ratio=0.01),)))
    text = exporter.scrape()
    after = {n: samples_of(text, f"ibpool_infiniband_{n}")[key] for n in names}
    assert after[names[0]] - before[names[0]] == pytest.approx(10 * half, abs=8)
    assert after[names[1]] - before[names[1]] == pytest.approx(10 * half / 2, abs=8)
    assert after[names[2]] - before[names[2]] == pytest.approx(
        0.01 * 10 * NDR_BYTES_PER_SECOND / WAIT_TICK_BYTES, abs=1
    )
    exporter.close()


def test_faults_reach_the_exporter(node: SimulatedNode) -> None:
    exporter = Exporter(node)
    node.advance(1.0, NodeLoad())
    exporter.scrape()
    node.fault("lose_gpu", gpu=1)
    node.fault("link_down", port=1)
    node.fault("saturate", port=0)
    node.fault("symbol_errors", port=0, value=5)
    text = exporter.scrape()
    assert samples_of(text, "ibpool_gpu_up") == {
        (("gpu", "0"), ("uuid", node.nvml.gpu(0).uuid)): 1.0,
        (("gpu", "1"), ("uuid", node.nvml.gpu(1).uuid)): 0.0,
    }
    assert samples_of(text, "ibpool_infiniband_state_id")[(("device", "mlx5_1"), ("port", "1"))] == 1.0
    saturated = samples_of(text, "ibpool_infiniband_counter_saturated")
    assert saturated[(("counter", "port_xmit_wait"), ("device", "mlx5_0"), ("port", "1"))] == 1.0
    assert (
        samples_of(text, "ibpool_infiniband_symbol_error_total")[(("device", "mlx5_0"), ("port", "1"))] >= 5
    )
    exporter.close()


def test_a_down_link_carries_no_traffic(node: SimulatedNode) -> None:
    node.fault("link_down", port=0)
    before = node.tree.value("mlx5_0", 1, "port_xmit_data")
    node.advance(5.0, NodeLoad((), (PortLoad(1e9, 1e9),)))
    assert node.tree.value("mlx5_0", 1, "port_xmit_data") == before


def test_bad_fault_requests_are_refused(node: SimulatedNode) -> None:
    with pytest.raises(FaultError, match="unknown fault"):
        node.fault("meteor")
    with pytest.raises(FaultError, match="gpu must be"):
        node.fault("xid", gpu=9)
    with pytest.raises(FaultError, match="port must be"):
        node.fault("flap", port=None)


def test_standalone_workload_is_deterministic_and_has_busy_and_idle_phases() -> None:
    a, b = StandaloneWorkload(8, 8, seed=3), StandaloneWorkload(8, 8, seed=3)
    loads = [a.load_at(t) for t in range(0, 1200, 10)]
    assert loads == [b.load_at(t) for t in range(0, 1200, 10)]
    busy = [load.gpus[0].utilization > 0.5 for load in loads]
    assert any(busy) and not all(busy)
    assert all(
        0 <= p.wait_ratio < 1 and p.tx_bytes_per_second <= NDR_BYTES_PER_SECOND
        for x in loads
        for p in x.ports
    )


def test_node_removes_the_tree_it_created() -> None:
    node = SimulatedNode(gpus=1, ports=1)
    root = node.sysfs_root
    assert (root / "class" / "infiniband" / "mlx5_0").exists()
    node.close()
    assert not root.exists()
