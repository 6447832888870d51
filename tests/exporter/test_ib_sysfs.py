"""The InfiniBand sysfs source: fixtures, generated trees, change detection, each bad input."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.sources import ib_sysfs, sysfs_files
from exporter.sources.ib_sysfs import InfinibandSnapshot, InfinibandSysfsSource, PortSnapshot
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

    monkeypatch.setattr("exporter.sources.sysfs_files.os.open", counting_open)
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

    monkeypatch.setattr("exporter.sources.sysfs_files.os.pread", pread)
    with caplog.at_level(logging.DEBUG, logger="exporter.sources.sysfs_files"):
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

    monkeypatch.setattr("exporter.sources.sysfs_files.os.pread", vanishing)
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

    monkeypatch.setattr("exporter.sources.sysfs_files.os.open", no_fds)


def test_out_of_fds_raises_the_soft_limit_once(tree: SysfsTree, monkeypatch: pytest.MonkeyPatch) -> None:
    raised: list[tuple[int, int]] = []
    rlimit = "exporter.sources.sysfs_files.resource"
    monkeypatch.setattr(f"{rlimit}.getrlimit", lambda _: (1024, 4096))
    monkeypatch.setattr(f"{rlimit}.setrlimit", lambda _, limits: raised.append(limits))
    _failing_open(monkeypatch, failures=1)
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    snap = must_port(src, "mlx5_0")
    assert raised == [(4096, 4096)]
    assert snap.hw_counters["np_cnp_sent"] == tree.value("mlx5_0", 1, "np_cnp_sent", "hw_counters")
    src.close()


def test_out_of_fds_falls_back_to_reading_by_path(tree: SysfsTree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysfs_files, "raise_fd_limit", lambda: False)
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


# --- hostile trees (issue 21): FIFOs, replaced files, out-of-range values --------------------------


def read_unblocked(source: InfinibandSysfsSource) -> InfinibandSnapshot:
    """`source.read()` on a helper thread; fails (instead of hanging the suite) if it blocks."""
    result: list[InfinibandSnapshot] = []
    worker = threading.Thread(target=lambda: result.append(source.read()), daemon=True)
    worker.start()
    worker.join(30)
    assert result, "read() blocked (a FIFO opened without O_NONBLOCK?)"
    return result[0]


def snap_port(snapshot: InfinibandSnapshot, device: str, port: int = 1) -> PortSnapshot:
    return next(p for p in snapshot.ports if p.device.name == device and p.port == port)


def test_a_fifo_counter_is_skipped_counted_and_the_file_comes_back(
    tree: SysfsTree, source: InfinibandSysfsSource
) -> None:
    source.read()
    path = Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error")
    path.unlink()
    os.mkfifo(path)
    snap = snap_port(read_unblocked(source), "mlx5_0")
    assert "symbol_error" not in snap.counters
    assert "link_downed" in snap.counters
    assert source.read_errors()["not_a_file"] == 1
    path.unlink()
    tree.add_errors("mlx5_0", 1, symbol_error=6)
    assert must_port(source, "mlx5_0").counters["symbol_error"] == 6


def test_fifos_present_at_the_first_listing_in_sysfs_mode(tree: SysfsTree) -> None:
    port = Path(tree.port_path("mlx5_0", 1))
    for relpath in ("state", "hw_counters/np_cnp_sent"):
        (port / relpath).unlink()
        os.mkfifo(port / relpath)
    board_id = Path(tree.device_path("mlx5_1"), "board_id")
    board_id.unlink()
    os.mkfifo(board_id)
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    snapshot = read_unblocked(src)
    snap = snap_port(snapshot, "mlx5_0")
    assert snap.state_id is None and snap.phys_state_id == 5
    assert "np_cnp_sent" not in snap.hw_counters and "rp_cnp_handled" in snap.hw_counters
    assert next(d for d in snapshot.devices if d.name == "mlx5_1").board_id is None
    assert src.read_errors()["not_a_file"] == 3
    for relpath in ("state", "hw_counters/np_cnp_sent"):
        (port / relpath).unlink()
        tree.repair("mlx5_0", 1, relpath)
    snap = snap_port(read_unblocked(src), "mlx5_0")  # sysfs mode lists nothing again: retried by path
    assert snap.state_id == 4
    assert snap.hw_counters["np_cnp_sent"] == tree.value("mlx5_0", 1, "np_cnp_sent", "hw_counters")
    assert src.read_errors()["not_a_file"] == 3
    src.close()


def test_a_removed_and_recreated_file_comes_back(tree: SysfsTree, source: InfinibandSysfsSource) -> None:
    tree.write_bad("mlx5_0", 1, "counters/symbol_error", "garbage")
    assert "symbol_error" not in must_port(source, "mlx5_0").counters
    path = Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error")
    path.unlink()
    path.write_text("12\n")  # ext4 hands out the freed inode number again at once
    assert must_port(source, "mlx5_0").counters["symbol_error"] == 12
    assert must_port(source, "mlx5_0").counters["symbol_error"] == 12
    assert source.read_errors()["garbage"] == 1


def _replace(path: Path, content: str) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(content)
    os.replace(tmp, path)


def test_sysfs_mode_reopens_a_file_replaced_after_a_bad_read(tree: SysfsTree) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    path = Path(tree.port_path("mlx5_0", 1), "counters", "symbol_error")
    path.write_text("garbage\n")  # in place: the open fd sees it
    assert "symbol_error" not in must_port(src, "mlx5_0").counters
    _replace(path, "8\n")  # a new file: the fd still holds the old one, which keeps saying garbage
    assert must_port(src, "mlx5_0").counters["symbol_error"] == 8
    assert must_port(src, "mlx5_0").counters["symbol_error"] == 8
    assert src.read_errors()["garbage"] == 1
    src.close()


def test_sysfs_mode_reopens_a_file_replaced_after_a_read_error(
    tree: SysfsTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = InfinibandSysfsSource(tree.root, change_detection="sysfs")
    src.read()
    path = Path(tree.port_path("mlx5_0", 1), "state")
    broken = os.stat(path).st_ino
    real_pread = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        if os.fstat(fd).st_ino == broken:
            raise OSError(errno.EIO, "Input/output error")
        return real_pread(fd, size, offset)

    monkeypatch.setattr("exporter.sources.sysfs_files.os.pread", pread)
    assert must_port(src, "mlx5_0").state_id is None
    assert src.read_errors()["unreadable"] == 1
    _replace(path, "2: INIT\n")
    assert must_port(src, "mlx5_0").state_id == 2
    assert src.read_errors()["unreadable"] == 1
    src.close()


class _Entry:
    """A directory entry that claims another entry's inode number, on another device."""

    def __init__(self, real: os.DirEntry[str], inode: int, dev: int) -> None:
        self._real = real
        self._inode = inode
        self._stat = os.stat_result((real.stat().st_mode, inode, dev, *real.stat()[3:]))
        self.name, self.path = real.name, real.path

    def inode(self) -> int:
        return self._inode

    def is_dir(self) -> bool:
        return self._real.is_dir()

    def stat(self) -> os.stat_result:
        return self._stat


def test_same_inode_number_on_another_device_is_another_file(
    tree: SysfsTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identity is (st_dev, st_ino): a file that reuses the number on another device is reopened."""
    src = InfinibandSysfsSource(tree.root, change_detection="stat")
    assert must_port(src, "mlx5_0").counters["symbol_error"] == 0
    counters = os.path.join(tree.port_path("mlx5_0", 1), "counters")
    old = os.stat(os.path.join(counters, "symbol_error"))
    tree.add_errors("mlx5_0", 1, symbol_error=5)  # a new file (new inode) that will claim the old number
    real_scandir = os.scandir

    class Listing:
        def __init__(self, path: str) -> None:
            self._entries = list(real_scandir(path))
            self._fake = os.path.realpath(path) == os.path.realpath(counters)

        def __enter__(self) -> list[object]:
            if not self._fake:
                return list(self._entries)
            return [
                _Entry(e, old.st_ino, old.st_dev + 1) if e.name == "symbol_error" else e
                for e in self._entries
            ]

        def __exit__(self, *_: object) -> None:
            pass

    monkeypatch.setattr("exporter.sources.sysfs_files.os.scandir", Listing)
    assert must_port(src, "mlx5_0").counters["symbol_error"] == 5
    src.close()


def test_counters_above_their_width_are_rejected_and_counted(
    tree: SysfsTree, source: InfinibandSysfsSource
) -> None:
    port = Path(tree.port_path("mlx5_1", 1))
    (port / "counters" / "symbol_error").write_text("9" * 50 + "\n")  # a 16-bit counter
    (port / "counters" / "link_downed").write_text("256\n")  # 8 bits
    (port / "counters" / "port_xmit_data").write_text(f"{2**64}\n")
    (port / "counters" / "port_rcv_data").write_text(f"{2**64 - 1}\n")  # 64 bits with PortCountersExtended
    (port / "counters" / "port_xmit_wait").write_text(f"{2**32}\n")  # 32 bits, PortCountersExtended or not
    (port / "hw_counters" / "np_cnp_sent").write_text(f"{2**64 + 5}\n")
    (port / "counters_ext" / "port_xmit_data_64").write_text("1" * 30 + "\n")
    snap = must_port(source, "mlx5_1")
    for name in ("symbol_error", "link_downed", "port_xmit_data", "port_xmit_wait"):
        assert name not in snap.counters, name
    assert snap.counters["port_rcv_data"] == 2**64 - 1
    assert snap.counters["port_rcv_errors"] == 0
    assert "np_cnp_sent" not in snap.hw_counters
    assert "port_xmit_data_64" not in snap.counters_ext
    assert source.read_errors()["out_of_range"] == 6
    (port / "counters" / "symbol_error").write_text("65535\n")
    assert must_port(source, "mlx5_1").counters["symbol_error"] == 65535


def test_a_static_file_recreated_under_a_reused_inode_number_is_read_again(
    tree: SysfsTree, source: InfinibandSysfsSource
) -> None:
    assert must_port(source, "mlx5_0").link_layer == "InfiniBand"
    path = Path(tree.port_path("mlx5_0", 1), "link_layer")
    path.unlink()  # not held open: ext4 gives the next file this inode number again
    path.write_text("Ethernet\n")
    assert must_port(source, "mlx5_0").link_layer == "Ethernet"
