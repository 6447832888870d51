"""One simulated GPU server: a sysfs tree and an NVML-compatible fake, driven by a load and by faults.

The node exporter reads this node through its real code paths (the IB collector reads the tree, the GPU
collector calls the fake). A `NodeLoad` says what the node is doing; `advance` turns it into counters,
samples and temperatures. The cluster simulation sets loads from its jobs; the standalone exporter
(`ibpool exporter --simulate`) uses `StandaloneWorkload`.
"""

from __future__ import annotations

import logging
import math
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from foundation.loop import Loop
from simulator.fake_nvml import FakeNvml
from simulator.nvml_costs import CallCosts
from simulator.sysfs_tree import SysfsTree, dgx_hcas

log = logging.getLogger(__name__)

# Bytes a port could have sent during one PortXmitWait tick; the simulated HCA's tick size.
WAIT_TICK_BYTES = 256
NDR_BYTES_PER_SECOND = 400e9 / 8
PACKET_BYTES = 4096


@dataclass(frozen=True)
class GpuLoad:
    """What one GPU is doing (ratios 0-1)."""

    utilization: float = 0.0
    memory_bandwidth: float = 0.0
    sm_active: float = 0.0
    tensor_active: float = 0.0
    memory_used_fraction: float = 0.0
    nvlink: float = 0.0


@dataclass(frozen=True)
class PortLoad:
    """What one IB port is doing: bytes per second each way, and the share of time data waited."""

    tx_bytes_per_second: float = 0.0
    rx_bytes_per_second: float = 0.0
    wait_ratio: float = 0.0


@dataclass(frozen=True)
class NodeLoad:
    """A node's load: one entry per GPU and per port (missing entries are idle)."""

    gpus: tuple[GpuLoad, ...] = ()
    ports: tuple[PortLoad, ...] = ()


class FaultError(ValueError):
    """A fault request that names an unknown kind or a GPU or port the node does not have."""


class SimulatedNode:
    """A node with `gpus` GPUs and `ports` single-port HCAs (mlx5_0.., 400 Gb/s NDR).

    `name` is the host in the HCAs' node descriptions; `hca_guids` their node GUIDs (one per port).
    """

    def __init__(
        self,
        root: Path | None = None,
        *,
        gpus: int = 8,
        ports: int = 8,
        seed: int = 1,
        name: str = "node1",
        clock: Callable[[], float] = time.monotonic,
        hca_guids: Sequence[int] | None = None,
        nvml_costs: CallCosts | None = None,
    ) -> None:
        self._owns_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix=f"ibpool-sim-{name}-")) if root is None else root
        self.name = name
        self.tree = SysfsTree(self.root, dgx_hcas(ports, host=name, guids=hca_guids), seed=seed)
        self.nvml = FakeNvml(gpu_count=gpus, clock=clock, uuid_seed=f"ibpool-sim/{name}", costs=nvml_costs)
        self.ports = [(device, 1) for device in self.tree.devices]
        self._carry: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    @property
    def sysfs_root(self) -> Path:
        """The directory to give the IB collector as its sysfs root."""
        return self.root

    def advance(self, seconds: float, load: NodeLoad) -> None:
        """Apply `load` to the GPUs from now, and account `seconds` of it on the IB ports."""
        with self._lock:
            total = self.nvml.gpu(0).model.memory_total_bytes if self.nvml.gpu_count else 0
            for index in range(self.nvml.gpu_count):
                g = load.gpus[index] if index < len(load.gpus) else GpuLoad()
                self.nvml.set_load(
                    index,
                    utilization=g.utilization,
                    memory_bandwidth=g.memory_bandwidth,
                    sm_active=g.sm_active,
                    tensor_active=g.tensor_active,
                    memory_used_bytes=int(g.memory_used_fraction * total),
                    nvlink_tx=g.nvlink,
                    nvlink_rx=g.nvlink,
                )
            for index, (device, port) in enumerate(self.ports):
                p = load.ports[index] if index < len(load.ports) else PortLoad()
                if device not in self.tree.devices or not self.tree.link_up(device, port):
                    continue
                self.tree.add_traffic(
                    device, port, int(p.tx_bytes_per_second * seconds), int(p.rx_bytes_per_second * seconds)
                )
                ticks = p.wait_ratio * seconds * NDR_BYTES_PER_SECOND / WAIT_TICK_BYTES
                ticks += self._carry.get((device, port), 0.0)
                whole = int(ticks)
                self._carry[(device, port)] = ticks - whole
                if whole:
                    self.tree.add_wait(device, port, whole)

    def fault(self, kind: str, gpu: int | None = None, port: int | None = None, value: int = 1) -> str:
        """Inject a fault; returns what was done. `port` is an index into `ports` (0 = mlx5_0 port 1)."""
        handlers: dict[str, Callable[[], str]] = {
            "xid": lambda: self._on_gpu(gpu, lambda i: self.nvml.inject_xid(i, value), f"XID {value}"),
            "lose_gpu": lambda: self._on_gpu(gpu, self.nvml.lose_gpu, "lost"),
            "restore_gpu": lambda: self._on_gpu(gpu, self.nvml.restore_gpu, "restored"),
            "ecc": lambda: self._on_gpu(
                gpu, lambda i: self.nvml.inject_ecc(i, uncorrected=value), f"{value} uncorrectable ECC errors"
            ),
            "thermal": lambda: self._on_gpu(
                gpu,
                lambda i: self.nvml.set_thermal_throttle(i, bool(value)),
                f"thermal throttle {'on' if value else 'off'}",
            ),
            "link_down": lambda: self._on_port(port, lambda d, p: self.tree.set_link(d, p, False), "down"),
            "link_up": lambda: self._on_port(port, lambda d, p: self.tree.set_link(d, p, True), "up"),
            "flap": lambda: self._on_port(port, self.tree.flap_link, "flapped"),
            "symbol_errors": lambda: self._on_port(
                port, lambda d, p: self.tree.add_errors(d, p, symbol_error=value), f"+{value} symbol errors"
            ),
            "hang_nvml": lambda: self._hang(value),
            "row_remap": lambda: self._on_gpu(
                gpu,
                lambda i: self.nvml.inject_row_remap(i, uncorrectable=value),
                f"{value} rows remapped (uncorrectable)",
            ),
            "remap_failure": lambda: self._on_gpu(
                gpu, lambda i: self.nvml.inject_row_remap(i, failure=True), "row remap failed"
            ),
            "stall_gpu": lambda: self._on_gpu(
                gpu, lambda i: self.nvml.stall_gpu(i, float(value)), f"every NVML call stalls for {value} s"
            ),
            "saturate": lambda: self._on_port(
                port, lambda d, p: self.tree.saturate(d, p, "port_xmit_wait"), "port_xmit_wait saturated"
            ),
        }
        handler = handlers.get(kind)
        if handler is None:
            raise FaultError(f"unknown fault {kind!r}; one of {', '.join(sorted(handlers))}")
        with self._lock:
            done = handler()
        log.info("simulated fault on %s: %s", self.name, done)
        return done

    def _hang(self, seconds: int) -> str:
        self.nvml.hang("nvmlDeviceGetFieldValues", seconds=float(seconds))
        return f"next NVML field read hangs for {seconds} s"

    def _on_gpu(self, gpu: int | None, action: Callable[[int], None], what: str) -> str:
        if gpu is None or not 0 <= gpu < self.nvml.gpu_count:
            raise FaultError(f"gpu must be 0..{self.nvml.gpu_count - 1}")
        action(gpu)
        return f"gpu {gpu}: {what}"

    def _on_port(self, port: int | None, action: Callable[[str, int], None], what: str) -> str:
        if port is None or not 0 <= port < len(self.ports):
            raise FaultError(f"port must be 0..{len(self.ports) - 1}")
        device, number = self.ports[port]
        action(device, number)
        return f"{device} port {number}: {what}"

    def close(self) -> None:
        """Remove the tree if this node created it."""
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)


class StandaloneWorkload:
    """A deterministic job pattern for a lone simulated node: training jobs with idle gaps.

    Every `period` seconds a job runs for `busy` seconds on all GPUs: compute with all-reduce bursts
    over the IB ports, a little congestion when traffic peaks; then the node idles.
    """

    def __init__(
        self, gpus: int, ports: int, seed: int = 1, period: float = 600.0, busy: float = 480.0
    ) -> None:
        rng = random.Random(seed)
        self._gpu_skew = [rng.uniform(-0.05, 0.05) for _ in range(gpus)]
        self._port_skew = [rng.uniform(0.9, 1.1) for _ in range(ports)]
        self._phase = rng.uniform(0, period)
        self._period, self._busy = period, busy

    def load_at(self, t: float) -> NodeLoad:
        """The load at `t` seconds."""
        in_job = (t + self._phase) % self._period < self._busy
        if not in_job:
            idle = GpuLoad(memory_used_fraction=0.01)
            return NodeLoad(tuple(idle for _ in self._gpu_skew), tuple(PortLoad() for _ in self._port_skew))
        wave = 0.5 + 0.5 * math.sin(t / 7.0)
        gpus = tuple(
            GpuLoad(
                utilization=min(1.0, 0.82 + 0.1 * wave + skew),
                memory_bandwidth=0.45 + 0.2 * wave,
                sm_active=0.7 + 0.15 * wave,
                tensor_active=0.45 + 0.2 * wave,
                memory_used_fraction=0.72,
                nvlink=0.3 + 0.3 * wave,
            )
            for skew in self._gpu_skew
        )
        ports = []
        for skew in self._port_skew:
            share = min(0.95, (0.35 + 0.5 * (1 - wave)) * skew)
            ports.append(
                PortLoad(
                    share * NDR_BYTES_PER_SECOND, share * NDR_BYTES_PER_SECOND, max(0.0, share - 0.7) * 0.05
                )
            )
        return NodeLoad(gpus, tuple(ports))


class SimulationTicker:
    """Advances a node with a workload every `step_seconds` of real time, on a daemon thread."""

    def __init__(self, node: SimulatedNode, workload: StandaloneWorkload, step_seconds: float = 1.0) -> None:
        self._node, self._workload = node, workload
        self._loop = Loop("simulation", step_seconds, self._tick, run_at_start=False)
        self._last = time.monotonic()
        self._node.advance(0.0, workload.load_at(self._last))

    def start(self) -> None:
        """Start ticking."""
        self._loop.start()

    def _tick(self) -> None:
        now = time.monotonic()
        elapsed, self._last = now - self._last, now  # a failed step's time is not carried into the next
        self._node.advance(elapsed, self._workload.load_at(now))

    def stop(self) -> None:
        """Stop ticking and wait for the thread."""
        self._loop.stop(5)
