"""The InfiniBand sysfs source: parsing, fixtures, generated trees, change detection, each bad input."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.sources import ib_sysfs
from exporter.sources.ib_sysfs import (
    InfinibandSysfsSource,
    PortSnapshot,
    RateInfo,
    parse_gid_port_guid,
    parse_guid,
    parse_rate,
    parse_state,
)
from simulator.sysfs_tree import SysfsTree, dgx_hcas
from tests.helpers import SYSFS_FIXTURES

FIXTURES = SYSFS_FIXTURES


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    """Two HCAs; mlx5_1 has the legacy counters_ext directory."""
    return SysfsTree(tmp_path, dgx_hcas(2, counters_ext=["mlx5_1"]))


@pytest.fixture
def source(tree: SysfsTree) -> Iterator[InfinibandSysfsSource]:
    src = InfinibandSysfsSource(tree.root)
    yield src
    src.close()


def port_of(source: InfinibandSysfsSource, device: str, port: int = 1) -> PortSnapshot | None:
    for snap in source.read().ports:
        if snap.device.name == device and snap.port == port:
            return snap
    return None


def must_port(source: InfinibandSysfsSource, device: str, port: int = 1) -> PortSnapshot:
    snap = port_of(source, device, port)
    assert snap is not None, f"{device} port {port} not read"
    return snap


# --- parsing ---------------------------------------------------------------------------------------


def test_parse_state() -> None:
    assert parse_state(b"4: ACTIVE\n") == (4, "ACTIVE")
    assert parse_state(b"5: LinkUp") == (5, "LinkUp")
    assert parse_state(b"ACTIVE") is None
    assert parse_state(b"x: ACTIVE") is None
    assert parse_state(b"4: A: B") is None


def test_parse_rate_matches_node_exporter_arithmetic() -> None:
    assert parse_rate(b"400 Gb/sec (4X NDR)\n") == RateInfo(50_000_000_000, 4, "NDR")
    assert parse_rate(b"25 Gb/sec (1X EDR)") == RateInfo(3_125_000_000, 1, "EDR")
    assert parse_rate(b"53.125 Gb/sec (1X HDR)") == RateInfo(6_640_625_000, 1, "HDR")
    assert parse_rate(b"56 Gb/sec (4X FDR)") == RateInfo(7_000_000_000, 4, "FDR")
    assert parse_rate(b"100 Gb/sec") == RateInfo(12_500_000_000, None, None)
    assert parse_rate(b"fast") is None
    assert parse_rate(b"x Gb/sec (4X)") is None


def test_parse_guids() -> None:
    assert parse_guid("0a7f:bc12:45ef:d23b\n") == "0x0a7fbc1245efd23b"
    assert parse_guid("nonsense") is None
    assert parse_gid_port_guid("fe80:0000:0000:0000:0a7f:bc12:45ef:d23c") == "0x0a7fbc1245efd23c"
    assert parse_gid_port_guid("0000:0000:0000:0000:0000:0000:0000:0000") is None


# --- real captures ---------------------------------------------------------------------------------


def test_reads_real_fixtures() -> None:
    src = InfinibandSysfsSource(FIXTURES)
    snap = src.read()
    devices = {d.name: d for d in snap.devices}
    assert sorted(devices) == ["hfi1_0", "mlx4_0", "mlx5_0"]
    assert devices["hfi1_0"].hca_type is None
    assert devices["mlx4_0"].hca_type == "MT4099"
    assert devices["mlx5_0"].node_guid == "0x0a7fbc1245efd23b"
    ports = {(p.device.name, p.port): p for p in snap.ports}
    assert sorted(ports) == [("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2), ("mlx5_0", 1)]
    mlx5 = ports[("mlx5_0", 1)]
    assert (mlx5.state_id, mlx5.phys_state_id, mlx5.rate_bytes_per_second) == (4, 4, 3_125_000_000)
    assert mlx5.counters["port_xmit_data"] == 2880761508848
    assert mlx5.hw_counters["rx_read_requests"] == 175528982
    assert "lifespan" not in mlx5.hw_counters
    assert ports[("mlx4_0", 2)].link_layer == "InfiniBand"
    assert all(count == 0 for count in src.read_errors().values())
    src.close()


# --- generated trees -------------------------------------------------------------------------------


def test_reads_generated_tree(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    snap = must_port(source, "mlx5_0")
    assert (snap.state_id, snap.state, snap.phys_state_id, snap.phys_state) == (4, "ACTIVE", 5, "LinkUp")
    assert (snap.rate_bytes_per_second, snap.link_width_lanes, snap.link_speed) == (50_000_000_000, 4, "NDR")
    assert snap.link_layer == "InfiniBand"
    assert snap.device.node_guid == "0xb83fd20300a1b200"
    assert snap.port_guid == "0xb83fd20300a1b200"
    assert snap.counters["port_xmit_data"] == tree.value("mlx5_0", 1, "port_xmit_data")
    assert snap.hw_counters["np_cnp_sent"] == tree.value("mlx5_0", 1, "np_cnp_sent", "hw_counters")
    assert snap.counters_ext == {}
    legacy = must_port(source, "mlx5_1")
    expected = tree.value("mlx5_1", 1, "port_xmit_data_64", "counters_ext")
    assert legacy.counters_ext["port_xmit_data_64"] == expected


def test_keeps_fds_open_between_scrapes(tree: SysfsTree, monkeypatch: pytest.MonkeyPatch) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    held = src.open_fds()
    assert held > 100
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str, flags: int, *args: int) -> int:
        opened.append(path)
        return real_open(path, flags, *args)

    monkeypatch.setattr("exporter.sources.ib_sysfs.os.open", counting_open)
    src.read()
    assert opened == []
    assert src.open_fds() == held
    src.close()
    assert src.open_fds() == 0


def test_sysfs_mode_sees_in_place_updates_without_listing(tree: SysfsTree) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    path = Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error")
    path.write_text("17\n")  # same inode, new content: what a kernel attribute does on every read
    assert must_port(src, "mlx5_0").counters["symbol_error"] == 17
    src.close()


def test_stat_mode_follows_atomic_replaces(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    before = must_port(source, "mlx5_0").counters["port_xmit_data"]
    tree.add_traffic("mlx5_0", 1, tx_bytes=4_000)
    assert must_port(source, "mlx5_0").counters["port_xmit_data"] == before + 1_000
    tree.set_link("mlx5_0", 1, up=False)
    snap = must_port(source, "mlx5_0")
    assert (snap.state_id, snap.phys_state_id) == (1, 3)
    assert snap.rate_bytes_per_second == 50_000_000_000


def test_change_detection_auto() -> None:
    if FIXTURES.is_dir():
        assert InfinibandSysfsSource(FIXTURES).change_detection == "stat"
    if os.path.isdir("/sys/class") and ib_sysfs._on_sysfs("/sys/class"):
        assert InfinibandSysfsSource("/sys").change_detection == "sysfs"


def test_concurrent_writer_never_yields_torn_values(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            tree.add_traffic("mlx5_0", 1, tx_bytes=123_456_789, rx_bytes=1)
            tree.set_link("mlx5_0", 1, up=True)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        last = 0
        for _ in range(200):
            value = must_port(source, "mlx5_0").counters["port_xmit_data"]
            assert value >= last
            last = value
    finally:
        stop.set()
        writer.join()
    assert all(count == 0 for count in source.read_errors().values())


def test_a_new_port_and_new_counter_files_are_found(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    source.read()
    Path(tree.port_path("mlx5_0", 1), "counters", "port_rcv_new_thing").write_text("5\n")
    assert must_port(source, "mlx5_0").counters["port_rcv_new_thing"] == 5


# --- bad input: one test each ----------------------------------------------------------------------


def test_missing_file_is_skipped_and_counted(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", 1, "rate", "missing")
    snap = must_port(source, "mlx5_0")
    assert snap.rate_bytes_per_second is None
    assert snap.state_id == 4
    assert source.read_errors()["missing"] == 1


def test_einval_on_read_is_skipped_and_counted(
    tree: SysfsTree,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    target = os.stat(os.path.join(tree.port_path("mlx5_0", 1), "counters", "symbol_error")).st_ino
    real_pread = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        if os.fstat(fd).st_ino == target:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pread(fd, size, offset)

    monkeypatch.setattr("exporter.sources.ib_sysfs.os.pread", pread)
    with caplog.at_level(logging.DEBUG, logger="exporter.sources.ib_sysfs"):
        first = must_port(src, "mlx5_0")
        second = must_port(src, "mlx5_0")
    assert "symbol_error" not in first.counters
    assert "symbol_error" not in second.counters
    assert "link_downed" in first.counters
    assert src.read_errors()["unreadable"] == 2
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "symbol_error" in r.getMessage()
    ]
    assert len(warnings) == 1  # warning once per path, debug afterwards
    src.close()


def test_not_available_counter_is_absent_not_zero(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", 1, "counters/port_xmit_wait", "not_available")
    snap = must_port(source, "mlx5_0")
    assert "port_xmit_wait" not in snap.counters
    assert source.read_errors()["not_available"] == 1


def test_garbage_text_is_skipped_and_counted(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", 1, "counters/symbol_error", "garbage")
    tree.write_bad("mlx5_0", 1, "state", "garbage")
    snap = must_port(source, "mlx5_0")
    assert "symbol_error" not in snap.counters
    assert snap.state_id is None
    assert snap.phys_state_id == 5
    assert source.read_errors()["garbage"] == 2


def test_directory_instead_of_file(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", 1, "counters/symbol_error", "directory")
    tree.write_bad("mlx5_0", 1, "phys_state", "directory")
    snap = must_port(source, "mlx5_0")
    assert "symbol_error" not in snap.counters
    assert snap.phys_state_id is None
    assert source.read_errors()["not_a_file"] == 2
    tree.repair("mlx5_0", 1, "counters/symbol_error")
    assert "symbol_error" in must_port(source, "mlx5_0").counters


def test_empty_file(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", 1, "hw_counters/np_cnp_sent", "empty")
    snap = must_port(source, "mlx5_0")
    assert "np_cnp_sent" not in snap.hw_counters
    assert "rp_cnp_handled" in snap.hw_counters
    assert source.read_errors()["empty"] == 1


def test_negative_value_is_garbage(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error").write_text("-3\n")
    assert "symbol_error" not in must_port(source, "mlx5_0").counters
    assert source.read_errors()["garbage"] == 1


def test_missing_device_files(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", None, "hca_type", "missing")  # optional, as node_exporter treats it
    tree.write_bad("mlx5_0", None, "fw_ver", "missing")
    snap = source.read()
    info = next(d for d in snap.devices if d.name == "mlx5_0")
    assert info.hca_type is None
    assert info.firmware_version is None
    assert source.read_errors()["missing"] == 1


def test_device_vanishing_between_scrapes_and_coming_back(
    tree: SysfsTree,
    source: InfinibandSysfsSource,
) -> None:
    assert port_of(source, "mlx5_1") is not None
    tree.remove_device("mlx5_1")
    assert port_of(source, "mlx5_1") is None
    assert [d.name for d in source.read().devices] == ["mlx5_0"]
    tree.add_device("mlx5_1")
    tree.add_errors("mlx5_1", 1, symbol_error=4)
    snap = must_port(source, "mlx5_1")
    assert snap.counters["symbol_error"] == 4
    assert all(count == 0 for count in source.read_errors().values())


def test_device_replaced_between_two_scrapes(tree: SysfsTree) -> None:
    """Stat mode; on real sysfs the old fds answer ENODEV instead (see the ENODEV test)."""
    src = InfinibandSysfsSource(tree.root, change_detection="stat")
    assert must_port(src, "mlx5_1").counters["symbol_error"] == 0
    tree.remove_device("mlx5_1")
    tree.add_errors("mlx5_1", 1, symbol_error=9)
    tree.add_device("mlx5_1")  # freed inode numbers may come back; the fds the reader holds are not freed
    assert must_port(src, "mlx5_1").counters["symbol_error"] == 9
    src.close()


def test_device_vanishing_in_sysfs_mode(tree: SysfsTree) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    held = src.open_fds()
    tree.remove_device("mlx5_1")
    assert port_of(src, "mlx5_1") is None
    assert src.open_fds() < held
    tree.add_device("mlx5_1")
    assert port_of(src, "mlx5_1") is not None
    assert src.open_fds() == held
    src.close()


def test_enodev_mid_scrape_drops_the_device_until_next_scrape(
    tree: SysfsTree,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    real_pread = os.pread
    calls = {"n": 0}

    def vanishing(fd: int, size: int, offset: int) -> bytes:
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(errno.ENODEV, "No such device")
        return real_pread(fd, size, offset)

    monkeypatch.setattr("exporter.sources.ib_sysfs.os.pread", vanishing)
    snap = src.read()
    assert [d.name for d in snap.devices] == ["mlx5_1"]
    assert src.read_errors()["missing"] == 1
    assert [d.name for d in src.read().devices] == ["mlx5_0", "mlx5_1"]
    src.close()


def test_saturated_counter_is_still_read(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.saturate("mlx5_0", 1, "port_xmit_wait")
    tree.add_wait("mlx5_0", 1, 1000)
    assert must_port(source, "mlx5_0").counters["port_xmit_wait"] == 2**32 - 1


def _failing_open(monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    """os.open raises EMFILE the first `failures` times each hw_counters path is opened."""
    real_open = os.open
    seen: dict[str, int] = {}

    def no_fds(path: str, flags: int, *args: int) -> int:
        if "hw_counters" in str(path):
            seen[str(path)] = seen.get(str(path), 0) + 1
            if seen[str(path)] <= failures:
                raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, *args)

    monkeypatch.setattr("exporter.sources.ib_sysfs.os.open", no_fds)


def test_out_of_fds_raises_the_soft_limit_once(tree: SysfsTree, monkeypatch: pytest.MonkeyPatch) -> None:
    raised: list[tuple[int, int]] = []
    rlimit = "exporter.sources.ib_sysfs.resource"
    monkeypatch.setattr(f"{rlimit}.getrlimit", lambda _: (1024, 4096))
    monkeypatch.setattr(f"{rlimit}.setrlimit", lambda _, limits: raised.append(limits))
    _failing_open(monkeypatch, failures=1)
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    snap = must_port(src, "mlx5_0")
    assert raised == [(4096, 4096)]
    assert snap.hw_counters["np_cnp_sent"] == tree.value("mlx5_0", 1, "np_cnp_sent", "hw_counters")
    src.close()


def test_out_of_fds_falls_back_to_reading_by_path(tree: SysfsTree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ib_sysfs, "_raise_fd_limit", lambda: False)
    _failing_open(monkeypatch, failures=1)
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    first = must_port(src, "mlx5_0")  # the fd table is built while hw_counters cannot be pinned
    tree.add_hw("mlx5_0", 1, np_cnp_sent=7)
    second = must_port(src, "mlx5_0")
    expected = tree.value("mlx5_0", 1, "np_cnp_sent", "hw_counters")
    assert first.hw_counters["np_cnp_sent"] == expected - 7
    assert second.hw_counters["np_cnp_sent"] == expected
    assert first.counters["symbol_error"] == 0
    assert all(count == 0 for count in src.read_errors().values())
    src.close()


def test_no_infiniband_class_is_empty(tmp_path: Path) -> None:
    src = InfinibandSysfsSource(tmp_path)
    snap = src.read()
    assert snap.devices == () and snap.ports == ()
