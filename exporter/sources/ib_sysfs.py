"""InfiniBand sysfs source: walks `<sysfs_root>/class/infiniband/<device>/...` into typed snapshots.

Files stay open between scrapes (`sysfs_files.PinnedFiles`) and values are parsed by `ib_values`. Which
directories are listed again each scrape depends on the change-detection mode: `sysfs` (the kernel's
tree: only `class/infiniband`) or `stat` (ordinary files: any directory whose identity or mtime changed).
A device whose file answers ENODEV is dropped until a later scrape finds it again. Costs and the reasons
for both modes: docs/node-exporter.md.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from exporter.sources.ib_values import (
    COUNTER_LIMITS,
    content_reason,
    parse_gid_port_guid,
    parse_guid,
    parse_rate,
    parse_state,
)
from exporter.sources.sysfs_files import (
    DirWatch,
    FileAccess,
    FileGoneError,
    PinnedFiles,
    list_dir,
    os_reason,
)

log = logging.getLogger(__name__)

ChangeDetection = Literal["auto", "sysfs", "stat"]
# Not counters: mlx5's `lifespan` is the counter-cache lifetime setting (ms), writable.
HW_COUNTER_EXCLUDED = frozenset({"lifespan"})
_ATTRS = ("state", "phys_state", "rate")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Static facts about one HCA; None where the file is absent or unreadable."""

    name: str
    board_id: str | None = None
    firmware_version: str | None = None
    hca_type: str | None = None
    node_guid: str | None = None  # "0x" + 16 hex digits


@dataclass(slots=True)
class PortSnapshot:
    """One port as read in one scrape; None or absent keys where a value could not be read."""

    device: DeviceInfo
    port: int
    state_id: int | None = None
    state: str | None = None
    phys_state_id: int | None = None
    phys_state: str | None = None
    rate_bytes_per_second: int | None = None
    link_width_lanes: int | None = None
    link_speed: str | None = None
    link_layer: str | None = None
    port_guid: str | None = None  # "0x" + 16 hex digits, from gids/0
    counters: dict[str, int] = field(default_factory=dict)
    counters_ext: dict[str, int] = field(default_factory=dict)
    hw_counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InfinibandSnapshot:
    """Every device and port read in one scrape, sorted by device name and port number."""

    devices: tuple[DeviceInfo, ...]
    ports: tuple[PortSnapshot, ...]


def _on_sysfs(path: str) -> bool:
    """True when `path` lies on a sysfs mount (longest mount point prefix in /proc/self/mountinfo)."""
    real = os.path.realpath(path)
    best, fstype = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                sep = fields.index("-")
                mount_point = fields[4].replace("\\040", " ")
                inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
                if inside and len(mount_point) >= len(best):
                    best, fstype = mount_point, fields[sep + 1]
    except (OSError, ValueError, IndexError):
        return False
    return fstype == "sysfs"


class _Port:
    """A port's open files and its static facts."""

    __slots__ = (
        "attrs",
        "built",
        "counters",
        "counters_ext",
        "hw",
        "link_layer",
        "number",
        "path",
        "port_guid",
    )

    def __init__(self, number: int, path: str) -> None:
        self.number = number
        self.path = path
        self.built = False
        self.attrs = PinnedFiles(path, wanted=_ATTRS)
        self.link_layer: str | None = None
        self.port_guid: str | None = None
        self.counters: PinnedFiles | None = None
        self.counters_ext: PinnedFiles | None = None
        self.hw: PinnedFiles | None = None

    def number_dirs(self) -> list[tuple[PinnedFiles, str]]:
        """The numeric directories the port has, with the snapshot field each fills."""
        pairs = ((self.counters, "counters"), (self.counters_ext, "counters_ext"), (self.hw, "hw_counters"))
        return [(d, f) for d, f in pairs if d is not None]

    def open_count(self) -> int:
        """How many fds the port holds."""
        return self.attrs.open_count() + sum(d.open_count() for d, _ in self.number_dirs())

    def close(self) -> None:
        """Close every fd."""
        self.attrs.close()
        for numbers, _ in self.number_dirs():
            numbers.close()
        self.built = False


class _Device:
    """One HCA: identity (its class entry's inode), static info, ports."""

    __slots__ = (
        "built",
        "ident",
        "info",
        "path",
        "ports",
        "ports_missing",
        "ports_path",
        "ports_watch",
        "watch",
    )

    def __init__(self, name: str, path: str, ident: int) -> None:
        self.path = path
        self.ports_path = os.path.join(path, "ports")
        self.ident = ident
        self.built = False
        self.info = DeviceInfo(name)
        self.ports: list[_Port] = []
        self.ports_missing = False
        self.watch = DirWatch()
        self.ports_watch = DirWatch()

    def close(self) -> None:
        """Close every fd."""
        for port in self.ports:
            port.close()
        self.ports = []


class InfinibandSysfsSource:
    """Reads every InfiniBand device under `<sysfs_root>/class/infiniband` (see the module docstring).

    `change_detection`: "auto" (sysfs when the tree is on a sysfs mount, else stat), "sysfs" or "stat".
    Not thread-safe: one `read()` at a time (the registry guarantees it).
    """

    def __init__(
        self,
        sysfs_root: str | os.PathLike[str],
        change_detection: ChangeDetection = "auto",
    ) -> None:
        self.class_path = os.path.join(os.fspath(sysfs_root), "class", "infiniband")
        if change_detection == "auto":
            change_detection = "sysfs" if _on_sysfs(self.class_path) else "stat"
        self.change_detection: ChangeDetection = change_detection
        self._stat_mode = change_detection == "stat"
        self._devices: dict[str, _Device] = {}
        self._order: list[_Device] = []
        self._class_watch = DirWatch()
        self._access = FileAccess()

    # public API -----------------------------------------------------------------------------------

    def read(self) -> InfinibandSnapshot:
        """Read every device and port once."""
        self._refresh_devices()
        devices: list[DeviceInfo] = []
        ports: list[PortSnapshot] = []
        for device in self._order:
            try:
                device_ports = self._read_device(device)
            except FileGoneError:
                self._drop(device.info.name)
                continue
            devices.append(device.info)
            ports.extend(device_ports)
        return InfinibandSnapshot(tuple(devices), tuple(ports))

    def read_errors(self) -> dict[str, int]:
        """Values skipped since start, by reason (every reason present, zero included)."""
        return self._access.errors()

    def open_fds(self) -> int:
        """How many file descriptors the source holds."""
        return sum(port.open_count() for device in self._order for port in device.ports)

    def close(self) -> None:
        """Close every file descriptor."""
        for device in self._order:
            device.close()
        self._devices = {}
        self._order = []
        self._class_watch = DirWatch()

    # devices ----------------------------------------------------------------------------------------

    def _refresh_devices(self) -> None:
        if self._stat_mode and not self._class_watch.changed(self.class_path):
            return
        started = time.time_ns()
        try:
            entries = list_dir(self.class_path)
        except FileNotFoundError:
            entries = {}
        except OSError as exc:
            self._access.count(os_reason(exc), self.class_path, exc)
            entries = {}
        if self._stat_mode:
            self._class_watch.listed(self.class_path, started)
        for name in [n for n in self._devices if n not in entries]:
            self._drop(name)
        for name, entry in entries.items():
            ident = entry.inode()
            known = self._devices.get(name)
            if known is not None and known.ident == ident:
                continue
            if known is not None:
                self._drop(name)
            self._devices[name] = _Device(name, entry.path, ident)
        self._order = [self._devices[n] for n in sorted(self._devices)]

    def _drop(self, name: str) -> None:
        """Forget a device; the next scrape lists class/infiniband again and finds it if it is back."""
        device = self._devices.pop(name, None)
        if device is not None:
            device.close()
            log.debug("infiniband device %s went away", name)
        self._order = [d for d in self._order if d.info.name != name]
        self._class_watch.clean = False

    def _read_device(self, device: _Device) -> list[PortSnapshot]:
        if not device.built or (self._stat_mode and device.watch.changed(device.path)):
            started = time.time_ns()
            device.info = self._read_device_info(device)
            if self._stat_mode:
                device.watch.listed(device.path, started)
            self._refresh_ports(device)
            device.built = True
        elif self._stat_mode and device.ports_watch.changed(device.ports_path):
            self._refresh_ports(device)
        if device.ports_missing:
            self._access.count("missing", device.ports_path)
        return [self._read_port(device.info, port) for port in device.ports]

    def _read_device_info(self, device: _Device) -> DeviceInfo:
        path = device.path
        static = self._access.read_static
        guid_path = os.path.join(path, "node_guid")
        guid_text = static(guid_path, optional=True)
        node_guid = None
        if guid_text is not None:
            node_guid = self._checked(parse_guid(guid_text), guid_text.encode(), guid_path)
        return DeviceInfo(
            device.info.name,
            board_id=static(os.path.join(path, "board_id"), optional=False),
            firmware_version=static(os.path.join(path, "fw_ver"), optional=False),
            hca_type=static(os.path.join(path, "hca_type"), optional=True),
            node_guid=node_guid,
        )

    def _refresh_ports(self, device: _Device) -> None:
        started = time.time_ns()
        try:
            entries = list_dir(device.ports_path)
        except OSError as exc:
            device.ports_missing = True
            device.close()
            if not isinstance(exc, FileNotFoundError):
                self._access.warn_once(device.ports_path, exc)
            return
        device.ports_missing = False
        if self._stat_mode:
            device.ports_watch.listed(device.ports_path, started)
        known = {p.number: p for p in device.ports}
        ports: list[_Port] = []
        for name, entry in entries.items():
            try:
                number = int(name)
            except ValueError:
                self._access.count("garbage", entry.path)
                continue
            port = known.pop(number, None) or _Port(number, entry.path)
            ports.append(port)
        for gone in known.values():
            gone.close()
        device.ports = sorted(ports, key=lambda p: p.number)

    # ports --------------------------------------------------------------------------------------------

    def _read_port(self, info: DeviceInfo, port: _Port) -> PortSnapshot:
        if not port.built or (self._stat_mode and port.attrs.watch.changed(port.path)):
            self._refresh_port(port)
        snap = PortSnapshot(info, port.number, link_layer=port.link_layer, port_guid=port.port_guid)
        self._read_port_attrs(port, snap)
        access = self._access
        for numbers, field_name in port.number_dirs():
            if self._stat_mode and numbers.watch.changed(numbers.path):
                self._refresh_numbers(numbers)
            numbers.read_numbers(getattr(snap, field_name), access)
        return snap

    def _refresh_port(self, port: _Port) -> None:
        """List the port directory: reopen what changed, read the static facts again."""
        started = time.time_ns()
        try:
            entries = list_dir(port.path)
        except FileNotFoundError:
            raise FileGoneError(port.path) from None
        if self._stat_mode:
            port.attrs.watch.listed(port.path, started)
        port.attrs.refresh(entries, self._access)
        static = self._access.read_static
        port.link_layer = static(os.path.join(port.path, "link_layer"), optional=True)
        gid = static(os.path.join(port.path, "gids", "0"), optional=True)
        port.port_guid = None if gid is None else parse_gid_port_guid(gid)
        port.counters = self._number_dir(port.counters, entries.get("counters"), frozenset(), COUNTER_LIMITS)
        port.counters_ext = self._number_dir(port.counters_ext, entries.get("counters_ext"), frozenset(), {})
        port.hw = self._number_dir(port.hw, entries.get("hw_counters"), HW_COUNTER_EXCLUDED, {})
        port.built = True

    def _number_dir(
        self,
        current: PinnedFiles | None,
        entry: os.DirEntry[str] | None,
        excluded: frozenset[str],
        limits: dict[str, int],
    ) -> PinnedFiles | None:
        if current is not None and entry is not None and current.ident == entry.inode():
            return current
        if current is not None:
            current.close()
        if entry is None:
            return None
        if not entry.is_dir():
            self._access.count("not_a_file", entry.path)
            return None
        numbers = PinnedFiles(entry.path, entry.inode(), excluded=excluded, limits=limits)
        self._refresh_numbers(numbers)
        return numbers

    def _refresh_numbers(self, numbers: PinnedFiles) -> None:
        started = time.time_ns()
        try:
            entries = list_dir(numbers.path)
        except FileNotFoundError:
            raise FileGoneError(numbers.path) from None
        if self._stat_mode:
            numbers.watch.listed(numbers.path, started)
        numbers.refresh(entries, self._access)

    # the hot path -------------------------------------------------------------------------------------

    def _read_port_attrs(self, port: _Port, snap: PortSnapshot) -> None:
        if (state := self._parsed(port, "state", parse_state)) is not None:
            snap.state_id, snap.state = state
        if (phys := self._parsed(port, "phys_state", parse_state)) is not None:
            snap.phys_state_id, snap.phys_state = phys
        if (rate := self._parsed(port, "rate", parse_rate)) is not None:
            snap.rate_bytes_per_second = rate.bytes_per_second
            snap.link_width_lanes = rate.width_lanes
            snap.link_speed = rate.speed

    def _parsed(self, port: _Port, name: str, parse: Callable[[bytes], _T | None]) -> _T | None:
        """One attribute parsed; a bad value is checked once against a replaced file, then counted."""
        raw = port.attrs.read(name, self._access)
        if raw is None:
            return None
        parsed = parse(raw)
        if parsed is None and port.attrs.reopen_if_replaced(name, self._access):
            raw = port.attrs.read(name, self._access)
            if raw is None:
                return None
            parsed = parse(raw)
        return self._checked(parsed, raw, os.path.join(port.path, name))

    def _checked(self, parsed: _T | None, raw: bytes, path: str) -> _T | None:
        """`parsed`, counting the raw content's fault when it is None."""
        if parsed is None:
            self._access.count(content_reason(raw), path)
        return parsed
