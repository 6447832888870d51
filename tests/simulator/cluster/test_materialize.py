"""A materialized node feeds the real exporter collectors with the model's values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.collectors.gpu import GpuCollector, build_gpu_collector
from exporter.collectors.infiniband import InfinibandCollector
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from foundation.exposition import render
from simulator.cluster.materialize import ClusterNodeView, MaterializedNodes
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec
from simulator.cluster.spec import simple_spec
from tests.helpers import samples_of, wait_for

PORT = (("device", "mlx5_0"), ("port", "1"))


class Exporter:
    """The real IB and GPU collectors over one materialized node."""

    def __init__(self, view: ClusterNodeView) -> None:
        self.view = view
        self.ib = InfinibandCollector(InfinibandSysfsSource(view.sysfs_root))
        self.gpu: GpuCollector = build_gpu_collector(view.sim.nvml, xid_timeout_ms=20)

    def scrape(self) -> str:
        self.view.sync()
        return render(self.ib.collect() + self.gpu.collect())

    def close(self) -> None:
        self.ib.close()
        self.gpu.close()


@pytest.fixture
def congested(tmp_path: Path) -> Iterator[tuple[ClusterModel, Exporter]]:
    model = ClusterModel(shared_uplink_spec())
    model.submit(chatty("hi"))
    model.submit(chatty("lo"))
    view = ClusterNodeView(model, "node0002", tmp_path / "node0002", job_map_dir=tmp_path / "jobs")
    exporter = Exporter(view)
    yield model, exporter
    exporter.close()
    view.close()


def test_port_counters_move_by_exactly_the_models_deltas(congested: tuple[ClusterModel, Exporter]) -> None:
    model, exporter = congested
    first = exporter.scrape()
    before = model.node_counters("node0002")[0]
    model.advance(15)
    second = exporter.scrape()
    after = model.node_counters("node0002")[0]
    names = {
        "ibpool_infiniband_port_data_transmitted_bytes_total": after.xmit_bytes - before.xmit_bytes,
        "ibpool_infiniband_port_data_received_bytes_total": after.rcv_bytes - before.rcv_bytes,
        "ibpool_infiniband_port_transmit_wait_total": after.xmit_wait - before.xmit_wait,
    }
    for name, delta in names.items():
        moved = samples_of(second, name)[PORT] - samples_of(first, name)[PORT]
        assert moved == pytest.approx(delta, abs=4), name
    assert names["ibpool_infiniband_port_transmit_wait_total"] > 0  # the low-priority ring waits
    tree = exporter.view.sim.tree
    guid = model.fabric_view().ports[model.hca_port("node0002")].node_guid
    assert tree.spec("mlx5_0").node_guid == guid


def test_gpu_load_is_the_models(congested: tuple[ClusterModel, Exporter]) -> None:
    model, exporter = congested
    exporter.scrape()
    model.advance(30)
    text = exporter.scrape()
    expected = model.node_load("node0002").gpus
    utilization = {dict(k)["gpu"]: v for k, v in samples_of(text, "ibpool_gpu_utilization_ratio").items()}
    assert len(utilization) == 8
    for gpu, value in utilization.items():
        assert value == pytest.approx(expected[int(gpu)].utilization, abs=0.02)
    assert max(utilization.values()) < 0.5  # communication-bound: GPUs mostly wait
    used = {dict(k)["gpu"]: v for k, v in samples_of(text, "ibpool_gpu_memory_used_bytes").items()}
    assert all(v > 0 for v in used.values())
    assert sorted(p.name for p in (exporter.view.job_map_dir or Path()).iterdir()) == [
        str(i) for i in range(8)
    ]


def test_faults_reach_the_collectors(congested: tuple[ClusterModel, Exporter]) -> None:
    model, exporter = congested
    exporter.scrape()
    model.inject_xid("node0002", 1, 48)
    model.lose_gpu("node0002", 5)
    model.set_link(model.host_link("node0002"), False)
    port = model.hca_port("node0002")
    model.add_symbol_errors(port, 3)
    model.saturate(port)
    text = exporter.scrape()
    up = {dict(k)["gpu"]: v for k, v in samples_of(text, "ibpool_gpu_up").items()}
    assert up["5"] == 0.0 and up["0"] == 1.0
    assert samples_of(text, "ibpool_infiniband_state_id")[PORT] == 1.0
    saturated = samples_of(text, "ibpool_infiniband_counter_saturated")
    assert saturated[(("counter", "port_xmit_wait"), *PORT)] == 1.0
    xid = exporter.gpu.xid
    assert xid is not None
    assert wait_for(lambda: sum(xid.counts().values()) == 1)
    xids = samples_of(exporter.scrape(), "ibpool_gpu_xid_errors_total")
    assert [dict(k)["xid"] for k in xids] == ["48"]


def test_materialized_nodes_are_made_once_and_only_when_asked(tmp_path: Path) -> None:
    model = ClusterModel(simple_spec({"p": 100}))
    nodes = MaterializedNodes(model, tmp_path)
    first = nodes.get("node0042")
    model.advance(120)
    assert nodes.get("node0042") is first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node0042"]
    nodes.close()
