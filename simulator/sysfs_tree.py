"""A simulated InfiniBand sysfs tree on disk, read by the real IB collector (and by node_exporter).

Layout as on a DGX: `devices/pci0000:00/<bdf>/infiniband/mlx5_N/...` with a symlink
`class/infiniband/mlx5_N -> ../../devices/...`, one port each, `400 Gb/sec (4X NDR)`, full `counters` and
mlx5 `hw_counters`; optionally a pre-4.5-kernel `counters_ext` directory.

Writes are atomic: a temp file in `<root>/.sysfs-tree-tmp/` (outside `class/`, so no reader ever lists it)
then `os.replace`. A replaced file is a new inode, so a reader that keeps fds open must notice; the
exporter's sysfs source does, from the directory mtime and each file's identity (docs/node-exporter.md).
Counters only go up and saturate at their PortCounters width (data and packet counters are 64-bit when
the HCA has PortCountersExtended, as mlx5 does; `port_xmit_wait` is always 32-bit).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from foundation import ib_counters

BadKind = Literal["not_available", "garbage", "empty", "directory", "missing"]
_BAD_TEXT: dict[str, str] = {"not_available": "N/A (no PMA)\n", "garbage": "garbage!?\n", "empty": ""}

# Widths and names from foundation.ib_counters; a counter at 2**width - 1 stays there.
COUNTERS = tuple(c.sysfs for c in ib_counters.PORT_COUNTERS)
LEGACY_COUNTERS = tuple(c.sysfs for c in ib_counters.LEGACY_COUNTERS)
MLX5_HW_COUNTERS = (
    "duplicate_request",
    "implied_nak_seq_err",
    "lifespan",
    "local_ack_timeout_err",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "req_cqe_error",
    "req_cqe_flush_error",
    "req_remote_access_errors",
    "req_remote_invalid_request",
    "req_rnr_retries_exceeded",
    "req_transport_retries_exceeded",
    "resp_cqe_error",
    "resp_cqe_flush_error",
    "resp_local_length_error",
    "resp_remote_access_errors",
    "rnr_nak_retry_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "rx_atomic_requests",
    "rx_dct_connect",
    "rx_icrc_encapsulated",
    "rx_read_requests",
    "rx_write_requests",
)
DGX_PCI = (
    "0000:18:00.0",
    "0000:40:00.0",
    "0000:4f:00.0",
    "0000:5e:00.0",
    "0000:9a:00.0",
    "0000:c0:00.0",
    "0000:ce:00.0",
    "0000:dc:00.0",
)
STATE_UP, PHYS_UP = "4: ACTIVE", "5: LinkUp"
STATE_DOWN, PHYS_DOWN = "1: DOWN", "3: Disabled"
_LIFESPAN_MS = 10
_MTU = 4096
_TRAFFIC = {  # direction -> (data, packets, unicast, legacy data, legacy packets, legacy unicast)
    "tx": (
        "port_xmit_data",
        "port_xmit_packets",
        "unicast_xmit_packets",
        "port_xmit_data_64",
        "port_xmit_packets_64",
        "port_unicast_xmit_packets",
    ),
    "rx": (
        "port_rcv_data",
        "port_rcv_packets",
        "unicast_rcv_packets",
        "port_rcv_data_64",
        "port_rcv_packets_64",
        "port_unicast_rcv_packets",
    ),
}


@dataclass(frozen=True)
class HcaSpec:
    """One simulated HCA."""

    name: str
    pci_address: str
    node_guid: int
    ports: int = 1
    rate: str = "400 Gb/sec (4X NDR)"
    link_layer: str = "InfiniBand"
    board_id: str = "MT_0000000838"
    fw_ver: str = "28.39.1002"
    hca_type: str = "MT4129"
    hw_counters: bool = True
    counters_ext: bool = False  # the pre-4.5-kernel directory (mlx4 era)
    extended_counters: bool = True  # 64-bit data/packet counters
    host: str = "dgx"  # the node description is "<host> <name>", as mlx5 writes it

    def port_guid(self, port: int) -> int:
        """GUID of a port (the node GUID plus port - 1, as ConnectX numbers them)."""
        return self.node_guid + port - 1


def dgx_hcas(
    count: int = 8,
    counters_ext: Iterable[str] = (),
    host: str = "dgx",
    guids: Sequence[int] | None = None,
) -> list[HcaSpec]:
    """`count` ConnectX-7 HCAs `mlx5_0..`, one NDR port each; `counters_ext`: those with the legacy dir.

    `host` names the node in the node descriptions; `guids` gives each HCA's node GUID (default: a
    fixed series, the same on every node).
    """
    legacy = set(counters_ext)
    if guids is not None and len(guids) != count:
        raise ValueError(f"{count} HCAs need {count} GUIDs, got {len(guids)}")
    return [
        HcaSpec(
            name=f"mlx5_{i}",
            pci_address=DGX_PCI[i] if i < len(DGX_PCI) else f"0000:{0x20 + i:02x}:00.0",
            node_guid=guids[i] if guids is not None else 0xB83FD20300A1B200 + 0x10 * i,
            counters_ext=f"mlx5_{i}" in legacy,
            host=host,
        )
        for i in range(count)
    ]


def format_guid(value: int) -> str:
    """A GUID as sysfs writes it: `b83f:d203:00a1:b200`."""
    digits = f"{value:016x}"
    return ":".join(digits[i : i + 4] for i in range(0, 16, 4))


class SysfsTree:
    """A sysfs tree under `root` and the API a simulation uses to drive it (thread-safe)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        hcas: Iterable[HcaSpec] | None = None,
        seed: int = 0,
    ) -> None:
        self.root = os.fspath(root)
        self.class_path = os.path.join(self.root, "class", "infiniband")
        self._tmp = os.path.join(self.root, ".sysfs-tree-tmp")
        self._names = itertools.count()
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self._specs = {h.name: h for h in (hcas if hcas is not None else dgx_hcas())}
        self._values: dict[tuple[str, int, str, str], int] = {}  # (device, port, dir, file) -> true value
        self._carry: dict[tuple[str, int, str], int] = {}  # data bytes not yet a whole 4-byte word
        self._links: dict[tuple[str, int], bool] = {}
        self._present: set[str] = set()
        os.makedirs(self.class_path, exist_ok=True)
        os.makedirs(self._tmp, exist_ok=True)
        for spec in self._specs.values():
            self._init_values(spec)
            self._write_device(spec)

    # reading back ---------------------------------------------------------------------------------

    @property
    def devices(self) -> list[str]:
        """Names of the devices currently in the tree."""
        return sorted(self._present)

    def spec(self, device: str) -> HcaSpec:
        """The spec a device was created from."""
        return self._specs[device]

    def device_path(self, device: str) -> str:
        """The device's real directory (class/infiniband/<device> links to it)."""
        spec = self._specs[device]
        return os.path.join(self.root, "devices", "pci0000:00", spec.pci_address, "infiniband", device)

    def port_path(self, device: str, port: int) -> str:
        """The port's directory."""
        return os.path.join(self.device_path(device), "ports", str(port))

    def value(self, device: str, port: int, name: str, directory: str = "counters") -> int:
        """The value the file shows now (saturated where the width says so)."""
        with self._lock:
            return self._shown(device, port, directory, name)

    def link_up(self, device: str, port: int = 1) -> bool:
        """Whether the port is up."""
        return self._links[(device, port)]

    # driving the simulation -----------------------------------------------------------------------

    def add_counters(
        self,
        device: str,
        port: int,
        deltas: Mapping[str, int],
        directory: str = "counters",
    ) -> None:
        """Add to counters (`directory` is counters, hw_counters or counters_ext); they never go down."""
        with self._lock:
            for name, delta in deltas.items():
                key = (device, port, directory, name)
                if key not in self._values:
                    raise KeyError(f"{device} port {port} has no {directory}/{name}")
                if delta < 0:
                    raise ValueError(f"{directory}/{name}: counters only go up (delta {delta})")
                self._values[key] += delta
                self._write_value(device, port, directory, name)

    def add_traffic(self, device: str, port: int = 1, tx_bytes: int = 0, rx_bytes: int = 0) -> None:
        """Account traffic: data counters in 4-byte words, packets of up to 4096 bytes (all unicast)."""
        with self._lock:
            for direction, nbytes in (("tx", tx_bytes), ("rx", rx_bytes)):
                if nbytes:
                    self._add_direction(device, port, direction, nbytes)

    def add_wait(self, device: str, port: int, ticks: int) -> None:
        """Ticks during which the port had data but could not send (congestion)."""
        self.add_counters(device, port, {"port_xmit_wait": ticks})

    def add_errors(self, device: str, port: int, **counts: int) -> None:
        """Add to error counters, e.g. `symbol_error=3, port_rcv_errors=1`."""
        self.add_counters(device, port, counts)

    def add_hw(self, device: str, port: int, **counts: int) -> None:
        """Add to driver hw_counters, e.g. `np_cnp_sent=10, rp_cnp_handled=10`."""
        self.add_counters(device, port, counts, directory="hw_counters")

    def set_link(self, device: str, port: int, up: bool) -> None:
        """Link up (`4: ACTIVE`, `5: LinkUp`) or down (`1: DOWN`, `3: Disabled`); the rate is unchanged."""
        with self._lock:
            self._links[(device, port)] = up
            path = self.port_path(device, port)
            self._write(os.path.join(path, "state"), (STATE_UP if up else STATE_DOWN) + "\n")
            self._write(os.path.join(path, "phys_state"), (PHYS_UP if up else PHYS_DOWN) + "\n")

    def flap_link(self, device: str, port: int = 1) -> None:
        """The link went down and came back: link_downed + 1, the port ends up active."""
        with self._lock:
            self.add_counters(device, port, {"link_downed": 1})
            self.set_link(device, port, True)

    def saturate(self, device: str, port: int, name: str, directory: str = "counters") -> None:
        """Push a counter to its all-ones maximum, where it stays."""
        with self._lock:
            width = self._width(device, directory, name)
            if width >= 64:
                raise ValueError(f"{directory}/{name} is 64 bits wide on {device}; it does not saturate")
            key = (device, port, directory, name)
            self._values[key] = max(self._values[key], (1 << width) - 1)
            self._write_value(device, port, directory, name)

    def remove_device(self, device: str) -> None:
        """Hot-unplug: the class link and the device directory go away (values are remembered)."""
        with self._lock:
            link = os.path.join(self.class_path, device)
            if os.path.lexists(link):
                os.unlink(link)
            shutil.rmtree(self.device_path(device), ignore_errors=True)
            self._present.discard(device)

    def add_device(self, device: str) -> None:
        """Bring a removed device back (new inodes, same values), as a driver re-registration does."""
        with self._lock:
            if device in self._present:
                raise ValueError(f"{device} is already present")
            self._write_device(self._specs[device])

    def write_bad(self, device: str, port: int | None, relpath: str, kind: BadKind) -> None:
        """Break one file (relative to the port dir, or to the device dir when `port` is None)."""
        with self._lock:
            base = self.device_path(device) if port is None else self.port_path(device, port)
            path = os.path.join(base, relpath)
            if kind in _BAD_TEXT:
                self._write(path, _BAD_TEXT[kind])
                return
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
            if kind == "directory":
                os.mkdir(path)

    def repair(self, device: str, port: int | None, relpath: str) -> None:
        """Write the good content of a file broken with `write_bad`."""
        with self._lock:
            spec = self._specs[device]
            if port is None:
                base = self.device_path(device)
                content = self._device_files(spec)[relpath]
            else:
                base = self.port_path(device, port)
                content = self._port_file(spec, port, relpath)
            path = os.path.join(base, relpath)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            self._write(path, content)

    def replace_spec(self, device: str, **changes: str | int | bool) -> None:
        """Change static facts of a device (firmware, rate, ...) and rewrite its files."""
        with self._lock:
            self._specs[device] = replace(self._specs[device], **changes)  # type: ignore[arg-type]
            if device in self._present:
                spec = self._specs[device]
                for name, content in self._device_files(spec).items():
                    self._write(os.path.join(self.device_path(device), name), content)
                for port in range(1, spec.ports + 1):
                    for name in ("rate", "link_layer"):
                        self._write(
                            os.path.join(self.port_path(device, port), name),
                            self._port_file(spec, port, name),
                        )

    # internals ------------------------------------------------------------------------------------

    def _init_values(self, spec: HcaSpec) -> None:
        rng = self._rng
        for port in range(1, spec.ports + 1):
            self._links[(spec.name, port)] = True
            for name in COUNTERS:
                self._values[(spec.name, port, "counters", name)] = 0
            if spec.hw_counters:
                for name in MLX5_HW_COUNTERS:
                    value = _LIFESPAN_MS if name == "lifespan" else rng.randrange(0, 5000)
                    self._values[(spec.name, port, "hw_counters", name)] = value
            if spec.counters_ext:
                for name in LEGACY_COUNTERS:
                    self._values[(spec.name, port, "counters_ext", name)] = 0
            self._add_direction(spec.name, port, "tx", rng.randrange(1 << 36, 1 << 44), write=False)
            self._add_direction(spec.name, port, "rx", rng.randrange(1 << 36, 1 << 44), write=False)
            self._values[(spec.name, port, "counters", "port_xmit_wait")] = rng.randrange(0, 1 << 20)
            self._values[(spec.name, port, "counters", "multicast_rcv_packets")] = rng.randrange(0, 1000)

    def _add_direction(self, device: str, port: int, direction: str, nbytes: int, write: bool = True) -> None:
        data, packets, unicast, *legacy = _TRAFFIC[direction]
        carry_key = (device, port, direction)
        words, self._carry[carry_key] = divmod(self._carry.get(carry_key, 0) + nbytes, 4)
        npackets = -(-nbytes // _MTU)
        updates = [
            ("counters", data, words),
            ("counters", packets, npackets),
            ("counters", unicast, npackets),
        ]
        if (device, port, "counters_ext", legacy[0]) in self._values:
            updates += [
                ("counters_ext", legacy[0], words),
                ("counters_ext", legacy[1], npackets),
                ("counters_ext", legacy[2], npackets),
            ]
        for directory, name, delta in updates:
            self._values[(device, port, directory, name)] += delta
            if write:
                self._write_value(device, port, directory, name)

    def _width(self, device: str, directory: str, name: str) -> int:
        if directory != "counters":
            return ib_counters.WIDEST_BITS
        counter = ib_counters.BY_SYSFS[name]
        return counter.sysfs_bits if self._specs[device].extended_counters else counter.bits

    def _shown(self, device: str, port: int, directory: str, name: str) -> int:
        value = self._values[(device, port, directory, name)]
        return min(value, (1 << self._width(device, directory, name)) - 1)

    def _write_value(self, device: str, port: int, directory: str, name: str) -> None:
        if device not in self._present:
            return
        path = os.path.join(self.port_path(device, port), directory, name)
        self._write(path, f"{self._shown(device, port, directory, name)}\n")

    def _device_files(self, spec: HcaSpec) -> dict[str, str]:
        return {
            "board_id": spec.board_id + "\n",
            "fw_ver": spec.fw_ver + "\n",
            "hca_type": spec.hca_type + "\n",
            "hw_rev": "0x0\n",
            "node_desc": f"{spec.host} {spec.name}\n",
            "node_guid": format_guid(spec.node_guid) + "\n",
            "node_type": "1: CA\n",
            "sys_image_guid": format_guid(spec.node_guid) + "\n",
        }

    def _port_file(self, spec: HcaSpec, port: int, relpath: str) -> str:
        directory, _, name = relpath.rpartition("/")
        if directory in ("counters", "hw_counters", "counters_ext"):
            return f"{self._shown(spec.name, port, directory, name)}\n"
        up = self._links[(spec.name, port)]
        files = {
            "state": (STATE_UP if up else STATE_DOWN) + "\n",
            "phys_state": (PHYS_UP if up else PHYS_DOWN) + "\n",
            "rate": spec.rate + "\n",
            "link_layer": spec.link_layer + "\n",
            "lid": f"0x{0x10 + port:x}\n",
            "sm_lid": "0x1\n",
            "sm_sl": "0\n",
            "lid_mask_count": "0\n",
            "cap_mask": "0xa751e848\n",
            "gids/0": "fe80:0000:0000:0000:" + format_guid(spec.port_guid(port)) + "\n",
            "pkeys/0": "0xffff\n",
        }
        return files[relpath]

    def _write_device(self, spec: HcaSpec) -> None:
        path = self.device_path(spec.name)
        os.makedirs(os.path.join(path, "ports"), exist_ok=True)
        for name, content in self._device_files(spec).items():
            self._write(os.path.join(path, name), content)
        for port in range(1, spec.ports + 1):
            self._write_port(spec, port)
        link = os.path.join(self.class_path, spec.name)
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(path, self.class_path), link)
        self._present.add(spec.name)

    def _write_port(self, spec: HcaSpec, port: int) -> None:
        path = self.port_path(spec.name, port)
        for sub in ("gids", "pkeys", "counters"):
            os.makedirs(os.path.join(path, sub), exist_ok=True)
        names = [
            "state",
            "phys_state",
            "rate",
            "link_layer",
            "lid",
            "sm_lid",
            "sm_sl",
            "lid_mask_count",
            "cap_mask",
            "gids/0",
            "pkeys/0",
        ]
        names += [f"counters/{n}" for n in COUNTERS]
        if spec.hw_counters:
            os.makedirs(os.path.join(path, "hw_counters"), exist_ok=True)
            names += [f"hw_counters/{n}" for n in MLX5_HW_COUNTERS]
        if spec.counters_ext:
            os.makedirs(os.path.join(path, "counters_ext"), exist_ok=True)
            names += [f"counters_ext/{n}" for n in LEGACY_COUNTERS]
        for relpath in names:
            self._write(os.path.join(path, relpath), self._port_file(spec, port, relpath))

    def _write(self, path: str, content: str) -> None:
        """Atomically replace `path` (temp file outside class/, then os.replace)."""
        tmp = os.path.join(self._tmp, f"{os.getpid()}-{next(self._names)}")
        with open(tmp, "w", encoding="ascii") as handle:
            handle.write(content)
        os.replace(tmp, path)
