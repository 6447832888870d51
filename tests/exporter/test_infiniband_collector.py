"""The InfiniBand collector: mapping to families, saturation, bad values, verbs MTUs, golden exposition."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter.collectors.infiniband import MIRRORED, InfinibandCollector
from exporter.config import load_config
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from exporter.sources.verbs import PortMtu, VerbsBackend, VerbsContext, VerbsMtuSource
from foundation.collector import Collector
from foundation.exposition import MetricFamily, render
from simulator.sysfs_tree import SysfsTree, dgx_hcas
from tests.helpers import SYSFS_FIXTURES

FIXTURES = SYSFS_FIXTURES
GOLDEN = Path(__file__).parent / "golden" / "fixtures_infiniband.prom"
Samples = dict[str, dict[str, float]]  # metric name -> rendered labels -> value


def samples(families: list[MetricFamily]) -> Samples:
    out: Samples = {}
    for family in families:
        for labels, value in family.samples:
            out.setdefault(family.spec.name, {})[labels] = value
    return out


def ib_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("ibpool_infiniband_")]


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return SysfsTree(tmp_path, dgx_hcas(2, counters_ext=["mlx5_1"]))


@pytest.fixture
def collector(tree: SysfsTree) -> Iterator[InfinibandCollector]:
    col = InfinibandCollector(InfinibandSysfsSource(tree.root))
    yield col
    col.close()


P0 = '{device="mlx5_0",port="1"}'


def test_is_a_collector(collector: InfinibandCollector) -> None:
    assert isinstance(collector, Collector)
    assert collector.name == "infiniband"


def test_maps_state_rate_width_and_info(tree: SysfsTree, collector: InfinibandCollector) -> None:
    got = samples(collector.collect())
    assert got["ibpool_infiniband_state_id"][P0] == 4
    assert got["ibpool_infiniband_physical_state_id"][P0] == 5
    assert got["ibpool_infiniband_rate_bytes_per_second"][P0] == 50_000_000_000
    assert got["ibpool_infiniband_link_width_lanes"][P0] == 4
    info = '{device="mlx5_0",board_id="MT_0000000838",firmware_version="28.39.1002",hca_type="MT4129"}'
    assert got["ibpool_infiniband_info"] == {info: 1, info.replace("mlx5_0", "mlx5_1"): 1}
    port_info = (
        '{device="mlx5_0",port="1",link_layer="InfiniBand",node_guid="0xb83fd20300a1b200",'
        'port_guid="0xb83fd20300a1b200",hca_type="MT4129",firmware_version="28.39.1002",'
        'board_id="MT_0000000838",link_speed="NDR"}'
    )
    assert got["ibpool_infiniband_port_info"][port_info] == 1


def test_data_counters_are_bytes(tree: SysfsTree, collector: InfinibandCollector) -> None:
    got = samples(collector.collect())
    words = tree.value("mlx5_0", 1, "port_xmit_data")
    assert got["ibpool_infiniband_port_data_transmitted_bytes_total"][P0] == 4 * words
    assert got["ibpool_infiniband_port_transmit_wait_total"][P0] == tree.value("mlx5_0", 1, "port_xmit_wait")
    legacy = got["ibpool_infiniband_legacy_data_transmitted_bytes_total"]
    words_ext = tree.value("mlx5_1", 1, "port_xmit_data_64", "counters_ext")
    assert legacy == {P0.replace("mlx5_0", "mlx5_1"): 4 * words_ext}


def test_hw_counters_by_name(tree: SysfsTree, collector: InfinibandCollector) -> None:
    tree.add_hw("mlx5_0", 1, np_cnp_sent=5, rp_cnp_handled=3, np_ecn_marked_roce_packets=8)
    hw = samples(collector.collect())["ibpool_infiniband_hw_counter_total"]
    assert hw['{device="mlx5_0",port="1",counter="np_cnp_sent"}'] == tree.value(
        "mlx5_0", 1, "np_cnp_sent", "hw_counters"
    )
    assert not any('counter="lifespan"' in labels for labels in hw)
    assert len(hw) == 2 * 31


def test_saturation_flag_for_every_32bit_counter(tree: SysfsTree, collector: InfinibandCollector) -> None:
    tree.saturate("mlx5_0", 1, "port_xmit_wait")
    got = samples(collector.collect())
    flags = got["ibpool_infiniband_counter_saturated"]
    assert flags['{device="mlx5_0",port="1",counter="port_xmit_wait"}'] == 1
    assert flags['{device="mlx5_1",port="1",counter="port_xmit_wait"}'] == 0
    assert flags['{device="mlx5_0",port="1",counter="port_xmit_data"}'] == 0
    assert len(flags) == 2 * 5
    assert got["ibpool_infiniband_port_transmit_wait_total"][P0] == 2**32 - 1


def test_not_available_counter_is_absent_and_counted(tree: SysfsTree, collector: InfinibandCollector) -> None:
    tree.write_bad("mlx5_0", 1, "counters/port_xmit_wait", "not_available")
    got = samples(collector.collect())
    assert P0 not in got["ibpool_infiniband_port_transmit_wait_total"]
    flag = '{device="mlx5_0",port="1",counter="port_xmit_wait"}'
    assert flag not in got["ibpool_infiniband_counter_saturated"]
    errors = got["ibpool_exporter_sysfs_read_errors_total"]
    assert errors['{reason="not_available"}'] == 1
    assert errors['{reason="garbage"}'] == 0


def test_an_out_of_range_counter_is_absent_and_counted(
    tree: SysfsTree, collector: InfinibandCollector
) -> None:
    Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error").write_text("9" * 50 + "\n")
    got = samples(collector.collect())
    assert P0 not in got["ibpool_infiniband_symbol_error_total"]
    assert got["ibpool_exporter_sysfs_read_errors_total"]['{reason="out_of_range"}'] == 1


def test_link_down_keeps_rate(tree: SysfsTree, collector: InfinibandCollector) -> None:
    tree.set_link("mlx5_0", 1, up=False)
    got = samples(collector.collect())
    assert got["ibpool_infiniband_state_id"][P0] == 1
    assert got["ibpool_infiniband_physical_state_id"][P0] == 3
    assert got["ibpool_infiniband_rate_bytes_per_second"][P0] == 50_000_000_000


def test_vanished_device_leaves_the_output(tree: SysfsTree, collector: InfinibandCollector) -> None:
    tree.remove_device("mlx5_1")
    text = render(collector.collect())
    assert 'device="mlx5_1"' not in text
    tree.add_device("mlx5_1")
    assert 'device="mlx5_1"' in render(collector.collect())


def test_close_releases_fds(tree: SysfsTree) -> None:
    source = InfinibandSysfsSource(tree.root)
    col = InfinibandCollector(source)
    col.collect()
    assert source.open_fds() > 0
    col.close()
    assert source.open_fds() == 0


# --- verbs -----------------------------------------------------------------------------------------


@dataclass
class _Attr:
    phys_port_cnt: int = 0
    active_mtu: int = 0
    max_mtu: int = 0


class _FakeContext:
    def __init__(self, ports: dict[int, tuple[int, int]]) -> None:
        self.ports = ports
        self.closed = False
        self.queries = 0

    def query_device(self) -> _Attr:
        return _Attr(phys_port_cnt=len(self.ports))

    def query_port(self, port_num: int) -> _Attr:
        self.queries += 1
        active, largest = self.ports[port_num]
        return _Attr(active_mtu=active, max_mtu=largest)

    def close(self) -> None:
        self.closed = True


class _FakeBackend:
    def __init__(self, devices: dict[str, _FakeContext]) -> None:
        self.devices = devices

    def device_names(self) -> list[str]:
        return sorted(self.devices)

    def open(self, name: str) -> VerbsContext:
        return self.devices[name]


def test_verbs_mtus_are_mapped(tree: SysfsTree) -> None:
    ctx = _FakeContext({1: (5, 5)})
    verbs = VerbsMtuSource(lambda: _FakeBackend({"mlx5_0": ctx, "mlx5_1": _FakeContext({1: (3, 5)})}))
    col = InfinibandCollector(InfinibandSysfsSource(tree.root), verbs)
    got = samples(col.collect())
    assert got["ibpool_infiniband_active_mtu_bytes"] == {P0: 4096, P0.replace("mlx5_0", "mlx5_1"): 1024}
    assert got["ibpool_infiniband_max_mtu_bytes"][P0] == 4096
    col.close()
    assert ctx.closed


def test_verbs_refresh_is_rate_limited() -> None:
    now = [0.0]
    ctx = _FakeContext({1: (4, 5), 2: (9, 5)})
    verbs = VerbsMtuSource(lambda: _FakeBackend({"mlx5_0": ctx}), refresh_seconds=30, clock=lambda: now[0])
    assert verbs.mtus() == {("mlx5_0", 1): PortMtu(2048, 4096), ("mlx5_0", 2): PortMtu(None, 4096)}
    verbs.mtus()
    assert ctx.queries == 2
    now[0] = 31.0
    verbs.mtus()
    assert ctx.queries == 4


def test_verbs_device_that_fails_is_skipped() -> None:
    class Broken(_FakeContext):
        def query_port(self, port_num: int) -> _Attr:
            raise OSError("device removed")

    broken = Broken({1: (5, 5)})
    verbs = VerbsMtuSource(lambda: _FakeBackend({"mlx5_0": broken, "mlx5_1": _FakeContext({1: (5, 5)})}))
    assert verbs.mtus() == {("mlx5_1", 1): PortMtu(4096, 4096)}
    assert broken.closed


def test_verbs_unavailable_without_pyverbs(tree: SysfsTree) -> None:
    def no_pyverbs() -> VerbsBackend:
        raise ImportError("No module named 'pyverbs'")

    verbs = VerbsMtuSource(no_pyverbs)
    assert not verbs.available
    assert verbs.mtus() == {}
    got = samples(InfinibandCollector(InfinibandSysfsSource(tree.root), verbs).collect())
    assert "ibpool_infiniband_active_mtu_bytes" not in got


def test_verbs_unavailable_without_devices() -> None:
    class NoDevices(_FakeBackend):
        def device_names(self) -> list[str]:
            raise RuntimeError("Failed to get devices list")  # what PyverbsRDMAError says here

    assert not VerbsMtuSource(lambda: NoDevices({})).available


def test_real_pyverbs_probe_does_not_raise() -> None:
    """Real pyverbs: absent, or present with no RDMA device (this host), is simply unavailable."""
    verbs = VerbsMtuSource()
    assert isinstance(verbs.mtus(), dict)
    if not os.path.isdir("/sys/class/infiniband") or not os.listdir("/sys/class/infiniband"):
        assert not verbs.available
    verbs.close()


# --- golden ----------------------------------------------------------------------------------------


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="real sysfs captures not present")
def test_golden_exposition_on_real_fixtures() -> None:
    """Reviewed against node_exporter 1.5.0 on the same tree (see the parity integration test)."""
    col = InfinibandCollector(InfinibandSysfsSource(FIXTURES))
    col.collect()  # a second scrape must equal the first
    got = ib_lines(render(col.collect()))
    col.close()
    if os.environ.get("IBPOOL_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text("\n".join(got) + "\n")
    assert got == GOLDEN.read_text().splitlines()


def test_without_mirror_only_what_node_exporter_lacks(tree: SysfsTree) -> None:
    """Beside node_exporter: none of the node_infiniband_* twins; port info, width, hw counters and the
    saturation flags (still computed from the counters) stay."""
    full = InfinibandCollector(InfinibandSysfsSource(tree.root))
    lean = InfinibandCollector(InfinibandSysfsSource(tree.root), mirror=False)
    try:
        tree.saturate("mlx5_0", 1, "port_xmit_wait")
        everything, served = samples(full.collect()), samples(lean.collect())
    finally:
        full.close()
        lean.close()
    mirrored = {spec.name for spec in MIRRORED}
    # 4 port facts, 22 counters and 8 legacy (counters_ext) counters: node_exporter has every one
    assert len(mirrored) == 34 and mirrored <= set(everything)
    assert set(served) == set(everything) - mirrored
    assert {
        "ibpool_infiniband_port_info",
        "ibpool_infiniband_link_width_lanes",
        "ibpool_infiniband_hw_counter_total",
        "ibpool_infiniband_counter_saturated",
    } <= set(served)
    flag = '{device="mlx5_0",port="1",counter="port_xmit_wait"}'
    assert served["ibpool_infiniband_counter_saturated"][flag] == 1
    for name in served:
        assert served[name] == everything[name], name


def test_mirror_is_a_flag_and_a_yaml_key(tmp_path: Path) -> None:
    flags = ["--no-collector.infiniband.mirror", "--sysfs-root", str(tmp_path)]
    assert load_config(flags).infiniband_mirror is False
    config = tmp_path / "exporter.yml"
    config.write_text(f"collectors:\n  infiniband: {{sysfs_root: {tmp_path}, mirror: false}}\n")
    assert load_config(["--config.file", str(config)]).infiniband_mirror is False
    assert load_config(["--sysfs-root", str(tmp_path)]).infiniband_mirror is True
