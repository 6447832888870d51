"""The simulated sysfs tree: layout, counters that only go up and saturate, link changes, faults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simulator.sysfs_tree import (
    LEGACY_COUNTERS,
    MLX5_HW_COUNTERS,
    HcaSpec,
    SysfsTree,
    dgx_hcas,
    format_guid,
)


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return SysfsTree(tmp_path)


def read(tree: SysfsTree, device: str, relpath: str, port: int | None = 1) -> str:
    base = tree.device_path(device) if port is None else tree.port_path(device, port)
    return Path(base, relpath).read_text()


def test_dgx_layout(tree: SysfsTree) -> None:
    assert tree.devices == [f"mlx5_{i}" for i in range(8)]
    link = Path(tree.class_path, "mlx5_0")
    assert link.is_symlink()
    assert link.resolve() == Path(tree.device_path("mlx5_0")).resolve()
    assert "/devices/pci0000:00/0000:18:00.0/infiniband/mlx5_0" in tree.device_path("mlx5_0")
    assert read(tree, "mlx5_0", "rate") == "400 Gb/sec (4X NDR)\n"
    assert read(tree, "mlx5_0", "state") == "4: ACTIVE\n"
    assert read(tree, "mlx5_0", "phys_state") == "5: LinkUp\n"
    assert read(tree, "mlx5_0", "link_layer") == "InfiniBand\n"
    assert read(tree, "mlx5_0", "node_guid", port=None) == "b83f:d203:00a1:b200\n"
    assert read(tree, "mlx5_0", "gids/0") == "fe80:0000:0000:0000:b83f:d203:00a1:b200\n"
    counters = os.listdir(Path(tree.port_path("mlx5_0", 1), "counters"))
    assert {"port_rcv_discards", "port_xmit_wait", "symbol_error", "unicast_xmit_packets"} <= set(counters)
    hw = set(os.listdir(Path(tree.port_path("mlx5_0", 1), "hw_counters")))
    assert {"np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"} <= hw
    assert hw == set(MLX5_HW_COUNTERS)
    assert not Path(tree.port_path("mlx5_0", 1), "counters_ext").exists()


def test_counters_ext_on_request(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path, dgx_hcas(2, counters_ext=["mlx5_1"]))
    assert sorted(os.listdir(Path(tree.port_path("mlx5_1", 1), "counters_ext"))) == sorted(LEGACY_COUNTERS)
    before = tree.value("mlx5_1", 1, "port_xmit_data_64", "counters_ext")
    tree.add_traffic("mlx5_1", 1, tx_bytes=400)
    assert tree.value("mlx5_1", 1, "port_xmit_data_64", "counters_ext") == before + 100


def test_seeded_values_are_reproducible(tmp_path: Path) -> None:
    a = SysfsTree(tmp_path / "a", seed=3)
    b = SysfsTree(tmp_path / "b", seed=3)
    assert read(a, "mlx5_5", "counters/port_xmit_data") == read(b, "mlx5_5", "counters/port_xmit_data")


def test_traffic_in_words_and_packets(tree: SysfsTree) -> None:
    data = tree.value("mlx5_0", 1, "port_xmit_data")
    packets = tree.value("mlx5_0", 1, "port_xmit_packets")
    tree.add_traffic("mlx5_0", 1, tx_bytes=10_000)
    tree.add_traffic("mlx5_0", 1, tx_bytes=2)
    tree.add_traffic("mlx5_0", 1, tx_bytes=2)
    assert tree.value("mlx5_0", 1, "port_xmit_data") == data + 2_501
    assert tree.value("mlx5_0", 1, "port_xmit_packets") == packets + 3 + 1 + 1
    assert read(tree, "mlx5_0", "counters/port_xmit_data") == f"{data + 2_501}\n"


def test_counters_only_go_up(tree: SysfsTree) -> None:
    with pytest.raises(ValueError, match="only go up"):
        tree.add_errors("mlx5_0", 1, symbol_error=-1)
    with pytest.raises(KeyError):
        tree.add_errors("mlx5_0", 1, no_such_counter=1)


def test_32bit_wait_counter_saturates(tree: SysfsTree) -> None:
    tree.add_wait("mlx5_0", 1, 2**32 + 5)
    assert read(tree, "mlx5_0", "counters/port_xmit_wait") == "4294967295\n"
    tree.add_wait("mlx5_0", 1, 1)
    assert tree.value("mlx5_0", 1, "port_xmit_wait") == 2**32 - 1


def test_narrow_error_counters_saturate_at_their_width(tree: SysfsTree) -> None:
    tree.add_errors("mlx5_0", 1, link_downed=1000, symbol_error=70_000)
    assert tree.value("mlx5_0", 1, "link_downed") == 255
    assert tree.value("mlx5_0", 1, "symbol_error") == 65_535


def test_extended_data_counters_do_not_saturate(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.add_traffic("mlx5_0", 1, tx_bytes=4 * 2**33)
    assert tree.value("mlx5_0", 1, "port_xmit_data") > 2**32
    with pytest.raises(ValueError, match="64 bits"):
        tree.saturate("mlx5_0", 1, "port_xmit_data")


def test_legacy_hca_data_counters_saturate_at_32_bits(tmp_path: Path) -> None:
    spec = HcaSpec(
        "mlx4_0",
        "0000:03:00.0",
        0x2C90300001000,
        rate="40 Gb/sec (4X QDR)",
        hca_type="MT4099",
        extended_counters=False,
        hw_counters=False,
    )
    tree = SysfsTree(tmp_path, [spec])
    tree.saturate("mlx4_0", 1, "port_xmit_data")
    assert tree.value("mlx4_0", 1, "port_xmit_data") == 2**32 - 1
    assert not Path(tree.port_path("mlx4_0", 1), "hw_counters").exists()


def test_saturate_helper(tree: SysfsTree) -> None:
    tree.saturate("mlx5_2", 1, "port_xmit_wait")
    assert read(tree, "mlx5_2", "counters/port_xmit_wait") == "4294967295\n"


def test_link_down_up_and_flap(tree: SysfsTree) -> None:
    tree.set_link("mlx5_3", 1, up=False)
    assert read(tree, "mlx5_3", "state") == "1: DOWN\n"
    assert read(tree, "mlx5_3", "phys_state") == "3: Disabled\n"
    assert read(tree, "mlx5_3", "rate") == "400 Gb/sec (4X NDR)\n"
    assert not tree.link_up("mlx5_3", 1)
    tree.flap_link("mlx5_3", 1)
    assert read(tree, "mlx5_3", "state") == "4: ACTIVE\n"
    assert tree.value("mlx5_3", 1, "link_downed") == 1


def test_hw_counters(tree: SysfsTree) -> None:
    before = tree.value("mlx5_4", 1, "np_cnp_sent", "hw_counters")
    tree.add_hw("mlx5_4", 1, np_cnp_sent=12, rp_cnp_handled=3)
    assert read(tree, "mlx5_4", "hw_counters/np_cnp_sent") == f"{before + 12}\n"


def test_remove_and_add_device(tree: SysfsTree) -> None:
    tree.add_errors("mlx5_1", 1, symbol_error=2)
    held = os.open(Path(tree.port_path("mlx5_1", 1), "counters", "symbol_error"), os.O_RDONLY)
    tree.remove_device("mlx5_1")
    assert not os.path.lexists(Path(tree.class_path, "mlx5_1"))
    assert not Path(tree.device_path("mlx5_1")).exists()
    assert "mlx5_1" not in tree.devices
    tree.add_errors("mlx5_1", 1, symbol_error=1)  # the model still counts while the device is away
    tree.add_device("mlx5_1")
    assert read(tree, "mlx5_1", "counters/symbol_error") == "3\n"
    new_inode = os.stat(Path(tree.port_path("mlx5_1", 1), "counters", "symbol_error")).st_ino
    assert new_inode != os.fstat(held).st_ino  # a held inode is never reused
    assert os.pread(held, 64, 0) == b"2\n"
    os.close(held)
    with pytest.raises(ValueError, match="already present"):
        tree.add_device("mlx5_1")


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("not_available", "N/A (no PMA)\n"),
        ("garbage", "garbage!?\n"),
        ("empty", ""),
    ],
)
def test_write_bad_text(tree: SysfsTree, kind: str, content: str) -> None:
    tree.write_bad("mlx5_0", 1, "counters/symbol_error", kind)  # type: ignore[arg-type]
    assert read(tree, "mlx5_0", "counters/symbol_error") == content
    tree.repair("mlx5_0", 1, "counters/symbol_error")
    assert read(tree, "mlx5_0", "counters/symbol_error") == "0\n"


def test_write_bad_directory_and_missing(tree: SysfsTree) -> None:
    tree.write_bad("mlx5_0", 1, "rate", "directory")
    assert Path(tree.port_path("mlx5_0", 1), "rate").is_dir()
    tree.repair("mlx5_0", 1, "rate")
    assert read(tree, "mlx5_0", "rate") == "400 Gb/sec (4X NDR)\n"
    tree.write_bad("mlx5_0", None, "hca_type", "missing")
    assert not Path(tree.device_path("mlx5_0"), "hca_type").exists()
    tree.repair("mlx5_0", None, "hca_type")
    assert read(tree, "mlx5_0", "hca_type", port=None) == "MT4129\n"


def test_writes_are_atomic_replaces_outside_class(tree: SysfsTree) -> None:
    path = Path(tree.port_path("mlx5_0", 1), "counters", "port_xmit_wait")
    before = os.stat(path).st_ino
    tree.add_wait("mlx5_0", 1, 7)
    assert os.stat(path).st_ino != before  # a new inode: readers holding the old fd must notice
    leftovers = [p for p in Path(tree.root).rglob("*") if "tmp" in p.name and p.is_file()]
    assert leftovers == []


def test_replace_spec(tree: SysfsTree) -> None:
    tree.replace_spec("mlx5_0", fw_ver="28.40.1000", rate="200 Gb/sec (2X NDR)")
    assert read(tree, "mlx5_0", "fw_ver", port=None) == "28.40.1000\n"
    assert read(tree, "mlx5_0", "rate") == "200 Gb/sec (2X NDR)\n"


def test_format_guid() -> None:
    assert format_guid(0x0A7FBC1245EFD23B) == "0a7f:bc12:45ef:d23b"
