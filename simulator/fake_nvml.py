"""An NVML-compatible fake: simulated GPUs behind pynvml's function names, structs, constants and errors.

`FakeNvml` answers the exporter's calls with the shapes pynvml returns and raises pynvml's `NVMLError`
subclasses; any pynvml constant, struct or error class is an attribute, and a pynvml function it does not
implement raises AttributeError. The simulation drives it (every control and the model: docs/simulator.md):

    nvml = FakeNvml(gpu_count=8, model=H200_SXM)       # time from a ManualClock starting at 0
    nvml.set_load(0, utilization=0.9, tensor_active=0.6, memory_used_bytes=60 << 30)
    nvml.step(15.0); nvml.inject_xid(3, 79); nvml.lose_gpu(5)
"""

# ruff: noqa: N802  (method names are NVML's)

from __future__ import annotations

import ctypes
import inspect
import math
import threading
import time
import uuid as uuidlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pynvml

from simulator.nvml_costs import CallCosts, CostMeter

_MIB = 1 << 20
EPOCH_US = 1_700_000_000_000_000  # NVML sample timestamps are CPU time in microseconds
SAMPLE_PERIOD_US = 166_667  # NVML samples utilization about every 1/6 s
SAMPLE_BUFFER = 120  # samples kept per kind (20 s), like the driver's ring buffer
AMBIENT_CELSIUS = 30.0
CELSIUS_PER_WATT = 0.07
THERMAL_TAU_SECONDS = 20.0
THROTTLE_EXTRA_CELSIUS = 20.0
ALL_REASONS = 0x1FF
_SUCCESS = pynvml.NVML_SUCCESS
_UINT = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
_ULL = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
_VALUE_ATTR = {_UINT: "uiVal", _ULL: "ullVal", pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal"}


class _PlainFieldValue(ctypes.Structure):
    """c_nvmlFieldValue_t's layout without pynvml's Python-level __setattr__."""

    _fields_ = pynvml.c_nvmlFieldValue_t._fields_


_NVLINK_ERROR_FIELDS = frozenset(
    {
        pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC,
        pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY,
        pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY,
    }
)


class ManualClock:
    """A clock that moves only when told to (seconds)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self.now += seconds


@dataclass(frozen=True)
class GpuModel:
    """Fixed properties of a simulated GPU model."""

    name: str
    memory_total_bytes: int
    power_limit_watts: float
    idle_power_watts: float
    nvlink_links: int
    nvlink_link_bytes_per_second: float  # per direction
    max_sm_clock_mhz: int
    idle_sm_clock_mhz: int
    memory_clock_mhz: int
    pcie_generation: int
    pcie_width: int
    pci_device_id: int
    vbios_version: str
    gpm_supported: bool = True
    memory_reserved_bytes: int = 644_939_776  # measured on an idle H200 (v1 used - v2 used)
    row_remapping: bool = True  # Ampere and newer remap rows; older GPUs retire pages
    mig_profiles: tuple[str, ...] = ()  # GPU instance profiles, e.g. "1g.18gb"


H100_SXM = GpuModel(
    "NVIDIA H100 80GB HBM3",
    81559 * _MIB,
    700.0,
    70.0,
    18,
    25e9,
    1980,
    345,
    2619,
    5,
    16,
    0x233010DE,
    "96.00.99.00.01",
    mig_profiles=("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
)
H200_SXM = GpuModel(
    "NVIDIA H200",
    143771 * _MIB,
    700.0,
    75.0,
    18,
    25e9,
    1980,
    345,
    3201,
    5,
    16,
    0x233510DE,
    "96.00.A5.00.01",
    mig_profiles=("1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
)
V100_SXM2 = GpuModel(
    "Tesla V100-SXM2-32GB",
    32768 * _MIB,
    300.0,
    40.0,
    6,
    25e9,
    1530,
    135,
    877,
    3,
    16,
    0x1DB510DE,
    "88.00.80.00.01",
    gpm_supported=False,
    row_remapping=False,
)
PCIE_TX_BYTES_PER_SECOND = 2e9  # host traffic of a busy GPU (data loading, checkpoints), at full load
PCIE_RX_BYTES_PER_SECOND = 4e9
MAX_MIG_DEVICES = 7
# NVML perf policies whose violation time the fake accumulates; the others answer 0.
VIOLATION_POLICIES = (
    pynvml.NVML_PERF_POLICY_POWER,
    pynvml.NVML_PERF_POLICY_THERMAL,
    pynvml.NVML_PERF_POLICY_SYNC_BOOST,
    pynvml.NVML_PERF_POLICY_BOARD_LIMIT,
    pynvml.NVML_PERF_POLICY_LOW_UTILIZATION,
    pynvml.NVML_PERF_POLICY_RELIABILITY,
)


def mig_memory_bytes(profile: str) -> int:
    """Memory of a MIG profile named like "3g.71gb" (decimal gigabytes, as NVIDIA names them)."""
    size = profile.split(".", 1)[1].removesuffix("gb")
    return int(size) * 10**9


@dataclass
class FakeMigDevice:
    """One MIG device (a GPU instance with one compute instance) of a GPU in MIG mode."""

    gpu_instance: int
    compute_instance: int
    profile: str
    uuid: str
    memory_total_bytes: int
    utilization: float = 0.0  # graphics engine activity
    memory_used_bytes: int = 0
    gpm_seconds: float = 0.0
    gpm_graphics: float = 0.0
    handle_struct: Any = None
    handle: Any = None


_BUS_NUMBERS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


@dataclass
class FakeGpu:
    """One simulated GPU: its load (set by the simulation), derived state, counters and faults."""

    index: int
    model: GpuModel
    uuid: str
    pci_bus_id: str
    utilization: float = 0.0
    memory_bandwidth: float = 0.0
    sm_active: float = 0.0
    tensor_active: float = 0.0
    nvlink_tx: float = 0.0  # fraction of each link's bandwidth
    nvlink_rx: float = 0.0
    memory_used_bytes: int = 0
    temperature: float = AMBIENT_CELSIUS
    energy_mj: float = 0.0
    nvlink_tx_bytes: list[float] = field(default_factory=list)
    nvlink_rx_bytes: list[float] = field(default_factory=list)
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    pcie_replays: int = 0
    gpm_seconds: float = 0.0  # cumulative seconds and activity-seconds, the basis of GPM metrics
    gpm_sm: float = 0.0
    gpm_tensor: float = 0.0
    gpm_graphics: float = 0.0
    gpm_dram: float = 0.0
    utilization_samples: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=SAMPLE_BUFFER))
    memory_samples: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=SAMPLE_BUFFER))
    thermal_throttle: bool = False
    lost_error: int | None = None  # NVML error of handle access while lost; None when present
    events_supported: bool = True
    gpm_supported: bool = True
    field_errors: dict[int, int] = field(default_factory=dict)  # field id -> NVML error code
    call_errors: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code
    handle_struct: Any = None
    handle: Any = None
    updated_us: int = 0  # simulated time the state was last brought up to
    memory_v2: bool = True  # the driver has nvmlDeviceGetMemoryInfo_v2
    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    retired_single_bit: int = 0
    retired_double_bit: int = 0
    retired_pending: bool = False
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, field id) -> count
    violation_ns: dict[int, float] = field(default_factory=dict)  # perf policy -> nanoseconds
    mig: list[FakeMigDevice] | None = None  # None: MIG mode off

    @property
    def lost(self) -> bool:
        """True between lose_gpu and restore_gpu."""
        return self.lost_error is not None

    def power_watts(self) -> float:
        """Board power: idle plus a share of the headroom that follows load."""
        m = self.model
        activity = min(1.0, 0.6 * self.utilization + 0.25 * self.tensor_active + 0.15 * self.memory_bandwidth)
        watts = m.idle_power_watts + (m.power_limit_watts - m.idle_power_watts) * activity
        return watts * 0.85 if self.thermal_throttle else watts

    def memory_temperature(self) -> float:
        """HBM runs a few degrees off the core."""
        return 0.9 * self.temperature + 6.0

    def throttle_mask(self) -> int:
        """Active clock-event reasons (nvmlClocksEventReason* bits)."""
        mask = 0
        if self.utilization <= 0.0:
            mask |= pynvml.nvmlClocksEventReasonGpuIdle
        if self.power_watts() >= 0.97 * self.model.power_limit_watts:
            mask |= pynvml.nvmlClocksEventReasonSwPowerCap
        if self.thermal_throttle:
            mask |= (
                pynvml.nvmlClocksEventReasonSwThermalSlowdown
                | pynvml.nvmlClocksEventReasonHwThermalSlowdown
                | pynvml.nvmlClocksEventReasonHwSlowdown
            )
        return mask

    def sm_clock_mhz(self) -> int:
        """Current SM clock: idle clock, boost, or reduced while throttled."""
        m = self.model
        if self.utilization <= 0.0:
            return m.idle_sm_clock_mhz
        if self.thermal_throttle:
            return int(m.max_sm_clock_mhz * 0.7)
        if self.power_watts() >= 0.97 * m.power_limit_watts:
            return int(m.max_sm_clock_mhz * 0.9)
        return m.max_sm_clock_mhz

    def advance_to(self, now_us: int) -> None:
        """Bring the state up to `now_us` (microseconds) under the current load."""
        if now_us > self.updated_us:
            self._integrate(self.updated_us, now_us)
            self.updated_us = now_us

    def _integrate(self, t0_us: int, t1_us: int) -> None:
        dt = (t1_us - t0_us) / 1e6
        watts = self.power_watts()
        self.energy_mj += watts * dt * 1000.0
        target = AMBIENT_CELSIUS + CELSIUS_PER_WATT * watts
        if self.thermal_throttle:
            target += THROTTLE_EXTRA_CELSIUS
        self.temperature = target + (self.temperature - target) * math.exp(-dt / THERMAL_TAU_SECONDS)
        per_link = self.model.nvlink_link_bytes_per_second * dt
        for link in range(len(self.nvlink_tx_bytes)):
            self.nvlink_tx_bytes[link] += self.nvlink_tx * per_link
            self.nvlink_rx_bytes[link] += self.nvlink_rx * per_link
        self.gpm_seconds += dt
        self.gpm_sm += self.sm_active * dt
        self.gpm_tensor += self.tensor_active * dt
        self.gpm_graphics += self.utilization * dt
        self.gpm_dram += self.memory_bandwidth * dt
        for policy, active in (
            (pynvml.NVML_PERF_POLICY_POWER, watts >= 0.97 * self.model.power_limit_watts),
            (pynvml.NVML_PERF_POLICY_THERMAL, self.thermal_throttle),
            (pynvml.NVML_PERF_POLICY_LOW_UTILIZATION, self.utilization <= 0.0),
        ):
            if active:
                self.violation_ns[policy] = self.violation_ns.get(policy, 0.0) + dt * 1e9
        for device in self.mig or ():
            device.gpm_seconds += dt
            device.gpm_graphics += device.utilization * dt
        self._add_samples(t0_us, t1_us)

    def memory_used_total(self) -> int:
        """Memory in use by processes (v2 `used`): the GPU's own plus its MIG devices'."""
        return self.memory_used_bytes + sum(d.memory_used_bytes for d in self.mig or ())

    def pcie_kib_per_second(self, counter: int) -> int:
        """PCIe throughput as nvmlDeviceGetPcieThroughput reports it (KiB/s), following load."""
        peak = (
            PCIE_TX_BYTES_PER_SECOND
            if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES
            else PCIE_RX_BYTES_PER_SECOND
        )
        return round(peak * self.utilization / 1024)

    def _add_samples(self, t0_us: int, t1_us: int) -> None:
        first = t0_us // SAMPLE_PERIOD_US + 1
        last = t1_us // SAMPLE_PERIOD_US
        first = max(first, last - SAMPLE_BUFFER + 1)
        util = round(self.utilization * 100)
        memory = round(self.memory_bandwidth * 100)
        for k in range(first, last + 1):
            stamp = EPOCH_US + k * SAMPLE_PERIOD_US
            self.utilization_samples.append((stamp, util))
            self.memory_samples.append((stamp, memory))


@dataclass
class _EventSet:
    struct: Any
    registered: dict[int, int] = field(default_factory=dict)  # gpu index -> event mask
    pending: deque[tuple[int, int, int]] = field(default_factory=deque)  # (gpu, type, data)


@dataclass(frozen=True)
class _GpmSnapshot:
    """Cumulative activity-seconds at sample time, and the activity ratios at that instant."""

    gpu: int
    instance: int | None  # GPU instance id of a MIG sample, None for the whole GPU
    seconds: float
    sm: float
    tensor: float
    graphics: float
    dram: float
    now: dict[str, float]


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


class FakeNvml:
    """Simulated NVML with `gpu_count` GPUs of one model; docs/simulator.md has the driving API."""

    def __init__(
        self,
        gpu_count: int = 8,
        model: GpuModel = H200_SXM,
        clock: Callable[[], float] | None = None,
        driver_version: str = "550.90.07",
        uuid_seed: str = "ibpool-fake-node",
        *,
        costs: CallCosts | None = None,
    ) -> None:
        self._clock: Callable[[], float] = clock if clock is not None else ManualClock()
        self.driver_version = driver_version
        self._lock = threading.RLock()
        self._events = threading.Condition(self._lock)
        self._refcount = 0
        self._init_error: int | None = None
        self._hangs: dict[str, list[Any]] = {}  # name -> [remaining calls, seconds or None]
        self._stalls: dict[int, float | None] = {}  # gpu index -> real-time end (None: until released)
        self._meter = CostMeter(costs) if costs is not None else None
        self._uuid_seed = uuid_seed
        self._release = threading.Event()
        self.blocked = 0  # calls now blocked by hang()
        self.calls: Counter[str] = Counter()  # every API call by name
        self._event_sets: dict[int, _EventSet] = {}
        self._gpm_samples: dict[int, list[Any]] = {}  # address -> [struct, _GpmSnapshot | None]
        self._gpus = [self._make_gpu(i, model, uuid_seed) for i in range(gpu_count)]
        self._by_handle = {ctypes.addressof(g.handle_struct): g for g in self._gpus}
        self._mig_by_handle: dict[int, tuple[FakeGpu, FakeMigDevice]] = {}
        start = self._now_us()
        for g in self._gpus:
            g.updated_us = start

    def __getattr__(self, name: str) -> Any:
        """pynvml's constants, structs and error classes, by reference; its functions are not forwarded."""
        value = getattr(pynvml, name)
        if inspect.isfunction(value):
            raise AttributeError(f"FakeNvml does not implement {name}")
        return value

    @staticmethod
    def _make_gpu(index: int, model: GpuModel, seed: str) -> FakeGpu:
        bus = _BUS_NUMBERS[index] if index < len(_BUS_NUMBERS) else 0xE0 + index
        gpu = FakeGpu(
            index,
            model,
            f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_URL, f'{seed}/{index}')}",
            f"00000000:{bus:02X}:00.0",
            gpm_supported=model.gpm_supported,
        )
        gpu.nvlink_tx_bytes = [0.0] * model.nvlink_links
        gpu.nvlink_rx_bytes = [0.0] * model.nvlink_links
        gpu.handle_struct = pynvml.struct_c_nvmlDevice_t()
        gpu.handle = ctypes.pointer(gpu.handle_struct)
        return gpu

    # --- simulation side -------------------------------------------------------------------------

    @property
    def gpu_count(self) -> int:
        """Number of simulated GPUs."""
        return len(self._gpus)

    def gpu(self, index: int) -> FakeGpu:
        """The state of GPU `index`, brought up to now (read it; change it through the methods)."""
        with self._lock:
            self._advance()
            return self._gpus[index]

    def step(self, seconds: float) -> None:
        """Advance the built-in ManualClock and the state by `seconds`."""
        if not isinstance(self._clock, ManualClock):
            raise TypeError("step() needs the built-in ManualClock; this fake follows an external clock")
        with self._lock:
            self._advance()
            self._clock.advance(seconds)
            self._advance()

    def set_load(
        self,
        gpu: int,
        *,
        utilization: float | None = None,
        memory_bandwidth: float | None = None,
        sm_active: float | None = None,
        tensor_active: float | None = None,
        memory_used_bytes: int | None = None,
        nvlink_tx: float | None = None,
        nvlink_rx: float | None = None,
    ) -> None:
        """Set what GPU `gpu` is doing from now on (ratios 0-1); arguments left out keep their value."""
        with self._lock:
            self._advance()
            g = self._gpus[gpu]
            for name, value in (
                ("utilization", utilization),
                ("memory_bandwidth", memory_bandwidth),
                ("sm_active", sm_active),
                ("tensor_active", tensor_active),
                ("nvlink_tx", nvlink_tx),
                ("nvlink_rx", nvlink_rx),
            ):
                if value is not None:
                    setattr(g, name, _clamp(value))
            if memory_used_bytes is not None:
                g.memory_used_bytes = max(0, min(memory_used_bytes, g.model.memory_total_bytes))

    def inject_xid(self, gpu: int, xid: int) -> None:
        """Deliver an XID critical error event to every event set watching GPU `gpu`."""
        with self._lock:
            for event_set in self._event_sets.values():
                if event_set.registered.get(gpu, 0) & pynvml.nvmlEventTypeXidCriticalError:
                    event_set.pending.append((gpu, pynvml.nvmlEventTypeXidCriticalError, xid))
            self._events.notify_all()

    def lose_gpu(self, gpu: int, handle_error: int = pynvml.NVML_ERROR_GPU_IS_LOST) -> None:
        """Every call on GPU `gpu` raises GPU_IS_LOST; getting its handle raises `handle_error`."""
        with self._lock:
            self._advance()
            self._gpus[gpu].lost_error = handle_error

    def restore_gpu(self, gpu: int) -> None:
        """GPU `gpu` answers again (same handle, same UUID)."""
        with self._lock:
            self._advance()
            self._gpus[gpu].lost_error = None

    def inject_ecc(self, gpu: int, corrected: int = 0, uncorrected: int = 0) -> None:
        """Add ECC errors to the volatile counters."""
        with self._lock:
            g = self._gpus[gpu]
            g.ecc_corrected += max(0, corrected)
            g.ecc_uncorrected += max(0, uncorrected)

    def inject_pcie_replays(self, gpu: int, count: int) -> None:
        """Add PCIe replay events."""
        with self._lock:
            self._gpus[gpu].pcie_replays += max(0, count)

    def inject_row_remap(
        self,
        gpu: int,
        correctable: int = 0,
        uncorrectable: int = 0,
        pending: bool | None = None,
        failure: bool | None = None,
    ) -> None:
        """Rows remapped after ECC errors; an uncorrectable one leaves a remap pending until a GPU reset."""
        with self._lock:
            g = self._gpus[gpu]
            g.remapped_correctable += max(0, correctable)
            g.remapped_uncorrectable += max(0, uncorrectable)
            if uncorrectable > 0:
                g.remap_pending = True
            if pending is not None:
                g.remap_pending = pending
            if failure is not None:
                g.remap_failure = failure

    def inject_retired_pages(
        self, gpu: int, single_bit: int = 0, double_bit: int = 0, pending: bool | None = None
    ) -> None:
        """Pages retired after ECC errors (GPUs without row remapping, e.g. V100)."""
        with self._lock:
            g = self._gpus[gpu]
            g.retired_single_bit += max(0, single_bit)
            g.retired_double_bit += max(0, double_bit)
            if pending is not None:
                g.retired_pending = pending

    def inject_nvlink_errors(
        self, gpu: int, link: int, *, crc: int = 0, replay: int = 0, recovery: int = 0
    ) -> None:
        """Add NVLink data-link errors on one link."""
        with self._lock:
            g = self._gpus[gpu]
            if not 0 <= link < g.model.nvlink_links:
                raise ValueError(f"GPU {gpu} has links 0..{g.model.nvlink_links - 1}")
            for field_id, count in (
                (pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, crc),
                (pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, replay),
                (pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY, recovery),
            ):
                g.nvlink_errors[(link, field_id)] = g.nvlink_errors.get((link, field_id), 0) + max(0, count)

    def enable_mig(self, gpu: int, profiles: tuple[str, ...]) -> None:
        """Put GPU `gpu` in MIG mode with one GPU instance (and one compute instance) per profile."""
        with self._lock:
            self._advance()
            g = self._gpus[gpu]
            unknown = [p for p in profiles if p not in g.model.mig_profiles]
            if unknown or not 0 < len(profiles) <= MAX_MIG_DEVICES:
                raise ValueError(
                    f"profiles must be 1..{MAX_MIG_DEVICES} of {g.model.mig_profiles}: {unknown}"
                )
            self.disable_mig(gpu)
            g.mig = []
            for n, profile in enumerate(profiles):
                seed = f"{self._uuid_seed}/{gpu}/mig/{n}"
                device = FakeMigDevice(
                    gpu_instance=n + 1,
                    compute_instance=0,
                    profile=profile,
                    uuid=f"MIG-{uuidlib.uuid5(uuidlib.NAMESPACE_URL, seed)}",
                    memory_total_bytes=mig_memory_bytes(profile),
                )
                device.handle_struct = pynvml.struct_c_nvmlDevice_t()
                device.handle = ctypes.pointer(device.handle_struct)
                self._mig_by_handle[ctypes.addressof(device.handle_struct)] = (g, device)
                g.mig.append(device)

    def disable_mig(self, gpu: int) -> None:
        """Leave MIG mode (its devices' handles become invalid)."""
        with self._lock:
            self._advance()
            g = self._gpus[gpu]
            for device in g.mig or ():
                self._mig_by_handle.pop(ctypes.addressof(device.handle_struct), None)
            g.mig = None

    def set_mig_load(
        self,
        gpu: int,
        instance: int,
        *,
        utilization: float | None = None,
        memory_used_bytes: int | None = None,
    ) -> None:
        """Set what MIG device number `instance` (0-based, in enable_mig order) of GPU `gpu` is doing."""
        with self._lock:
            self._advance()
            devices = self._gpus[gpu].mig
            if devices is None:
                raise ValueError(f"GPU {gpu} is not in MIG mode")
            device = devices[instance]
            if utilization is not None:
                device.utilization = _clamp(utilization)
            if memory_used_bytes is not None:
                device.memory_used_bytes = max(0, min(memory_used_bytes, device.memory_total_bytes))

    def set_costs(self, costs: CallCosts | None) -> None:
        """From now on each call takes its cost in `costs` of real time (None: as fast as possible)."""
        with self._lock:
            self._meter = CostMeter(costs) if costs is not None else None

    @property
    def paid_seconds(self) -> float:
        """Real seconds the calls have spent on their costs so far (0 without costs)."""
        meter = self._meter
        return meter.paid_seconds if meter is not None else 0.0

    def set_thermal_throttle(self, gpu: int, active: bool) -> None:
        """Hot GPU: thermal slowdown reasons active, lower clock and power, higher temperature."""
        with self._lock:
            self._advance()
            self._gpus[gpu].thermal_throttle = active

    def set_field_error(
        self, field_id: int, code: int | None = pynvml.NVML_ERROR_NOT_SUPPORTED, gpu: int | None = None
    ) -> None:
        """Make a field answer `code` (NOT_SUPPORTED by default; None clears) on one or every GPU."""
        with self._lock:
            for g in self._select(gpu):
                if code is None:
                    g.field_errors.pop(field_id, None)
                else:
                    g.field_errors[field_id] = code

    def set_call_error(
        self, call: str, code: int | None = pynvml.NVML_ERROR_NOT_SUPPORTED, gpu: int | None = None
    ) -> None:
        """Make a device call (by function name) raise `code` (None clears) on one or every GPU."""
        with self._lock:
            for g in self._select(gpu):
                if code is None:
                    g.call_errors.pop(call, None)
                else:
                    g.call_errors[call] = code

    def set_capabilities(
        self, gpu: int, *, gpm: bool | None = None, events: bool | None = None, memory_v2: bool | None = None
    ) -> None:
        """Turn GPM, event support or the driver's nvmlDeviceGetMemoryInfo_v2 of GPU `gpu` on or off."""
        with self._lock:
            g = self._gpus[gpu]
            if gpm is not None:
                g.gpm_supported = gpm
            if events is not None:
                g.events_supported = events
            if memory_v2 is not None:
                g.memory_v2 = memory_v2

    def fail_init(self, code: int | None = pynvml.NVML_ERROR_DRIVER_NOT_LOADED) -> None:
        """Make nvmlInit raise `code` (None: succeed again)."""
        with self._lock:
            self._init_error = code

    def hang(self, call: str, seconds: float | None = None, times: int = 1) -> None:
        """The next `times` calls of `call` block until release_hangs() or `seconds` of real time."""
        with self._lock:
            self._hangs[call] = [times, seconds]
            if self._release.is_set():
                self._release = threading.Event()

    def stall_gpu(self, gpu: int, seconds: float | None = None) -> None:
        """Every call on GPU `gpu` blocks from now on, for `seconds` of real time or until release_hangs()."""
        with self._lock:
            if not 0 <= gpu < len(self._gpus):
                raise IndexError(f"no GPU {gpu}")
            self._stalls[gpu] = None if seconds is None else time.monotonic() + seconds
            if self._release.is_set():
                self._release = threading.Event()

    def release_hangs(self) -> None:
        """Unblock every hung or stalled call and cancel pending hangs and stalls."""
        with self._lock:
            self._hangs.clear()
            self._stalls.clear()
            self._release.set()

    def wait_blocked(self, timeout: float = 5.0) -> bool:
        """Wait (real time) until some call is blocked by hang(); True if one is."""
        deadline = time.monotonic() + timeout
        while self.blocked == 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)
        return True

    @property
    def initialized(self) -> bool:
        """True while nvmlInit calls outnumber nvmlShutdown calls."""
        return self._refcount > 0

    @property
    def open_gpm_samples(self) -> int:
        """GPM samples allocated and not yet freed."""
        return len(self._gpm_samples)

    # --- plumbing --------------------------------------------------------------------------------

    def _select(self, gpu: int | None) -> list[FakeGpu]:
        return list(self._gpus) if gpu is None else [self._gpus[gpu]]

    def _now_us(self) -> int:
        return round(self._clock() * 1e6)

    def _advance(self) -> None:
        """Bring every GPU up to now."""
        now = self._now_us()
        for g in self._gpus:
            g.advance_to(now)

    @staticmethod
    def _error(code: int) -> Exception:
        return pynvml.NVMLError(code)  # type: ignore[no-any-return]

    def _hang_point(self, call: str) -> None:
        with self._lock:
            pending = self._hangs.get(call)
            if pending is None:
                return
            pending[0] -= 1
            if pending[0] <= 0:
                del self._hangs[call]
            gate, seconds = self._release, pending[1]
            self.blocked += 1
        try:
            gate.wait(seconds)
        finally:
            with self._lock:
                self.blocked -= 1

    @contextmanager
    def _api(self, call: str) -> Iterator[None]:
        """Enter a library call: hang point, lock, initialized check."""
        self._hang_point(call)
        with self._lock:
            self.calls[call] += 1
            if self._refcount <= 0:
                raise self._error(pynvml.NVML_ERROR_UNINITIALIZED)
            yield

    def _stall_point(self, gpu: int) -> None:
        with self._lock:
            if gpu not in self._stalls:
                return
            until, gate = self._stalls[gpu], self._release
            remaining = None if until is None else until - time.monotonic()
            if remaining is not None and remaining <= 0:
                del self._stalls[gpu]
                return
            self.blocked += 1
        try:
            gate.wait(remaining)
        finally:
            with self._lock:
                self.blocked -= 1

    def _before_device_call(self, call: str, handle: Any, cost: float | None) -> None:
        """Outside the lock: a stall of the handle's GPU, then the call's cost (real time)."""
        address = self._address(handle)
        gpu = self._by_handle.get(address)
        if gpu is None:
            mig = self._mig_by_handle.get(address)
            gpu = mig[0] if mig is not None else None
        if gpu is None:
            return
        self._stall_point(gpu.index)
        meter = self._meter
        if meter is not None:
            meter.pay(gpu.index, meter.costs.call(call) if cost is None else cost)

    @staticmethod
    def _address(handle: Any) -> int:
        try:
            return ctypes.cast(handle, ctypes.c_void_p).value or 0
        except ctypes.ArgumentError:
            return 0

    @contextmanager
    def _device(self, call: str, handle: Any, cost: float | None = None) -> Iterator[FakeGpu]:
        """Enter a device call: stall and cost, as _api, the GPU behind `handle` (brought up to now), lost,
        errors."""
        self._before_device_call(call, handle, cost)
        with self._api(call):
            gpu = self._gpu_of(handle)
            if gpu.lost:
                raise self._error(pynvml.NVML_ERROR_GPU_IS_LOST)
            code = gpu.call_errors.get(call)
            if code is not None:
                raise self._error(code)
            gpu.advance_to(self._now_us())
            yield gpu

    def _gpu_of(self, handle: Any) -> FakeGpu:
        gpu = self._by_handle.get(self._address(handle))
        if gpu is None:
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    @contextmanager
    def _any_device(self, call: str, handle: Any) -> Iterator[tuple[FakeGpu, FakeMigDevice | None]]:
        """A call that takes a GPU's handle or a MIG device's: (its GPU, the MIG device or None)."""
        mig = self._mig_by_handle.get(self._address(handle))
        if mig is None:
            with self._device(call, handle) as gpu:
                yield gpu, None
            return
        self._before_device_call(call, handle, None)
        with self._api(call):
            found = self._mig_by_handle.get(self._address(handle))
            if found is None:  # MIG mode was left meanwhile
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            gpu, device = found
            if gpu.lost:
                raise self._error(pynvml.NVML_ERROR_GPU_IS_LOST)
            gpu.advance_to(self._now_us())
            yield gpu, device

    # --- library -----------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        """Initialise (reference counted), or raise the error set by fail_init()."""
        self._hang_point("nvmlInit")
        with self._lock:
            self.calls["nvmlInit"] += 1
            if self._init_error is not None:
                raise self._error(self._init_error)
            self._refcount += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        """As nvmlInit."""
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        """Drop one reference."""
        with self._api("nvmlShutdown"):
            self._refcount -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """The driver version string."""
        with self._api("nvmlSystemGetDriverVersion"):
            return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs."""
        with self._api("nvmlDeviceGetCount"):
            return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """A `c_nvmlDevice_t`; a lost GPU raises the error given to lose_gpu()."""
        with self._api("nvmlDeviceGetHandleByIndex"):
            if not 0 <= index < len(self._gpus):
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            gpu = self._gpus[index]
            if gpu.lost_error is not None:
                raise self._error(gpu.lost_error)
            return gpu.handle

    # --- device: static ----------------------------------------------------------------------------

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        """The GPU's index."""
        with self._device("nvmlDeviceGetIndex", handle) as gpu:
            return gpu.index

    def nvmlDeviceGetName(self, handle: Any) -> str:
        """The product name (a MIG device's ends with its profile: "NVIDIA H200 MIG 3g.71gb")."""
        with self._any_device("nvmlDeviceGetName", handle) as (gpu, mig):
            return gpu.model.name if mig is None else f"{gpu.model.name} MIG {mig.profile}"

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """The GPU's UUID (GPU-...) or the MIG device's (MIG-...)."""
        with self._any_device("nvmlDeviceGetUUID", handle) as (gpu, mig):
            return gpu.uuid if mig is None else mig.uuid

    def nvmlDeviceGetVbiosVersion(self, handle: Any) -> str:
        """The VBIOS version."""
        with self._device("nvmlDeviceGetVbiosVersion", handle) as gpu:
            return gpu.model.vbios_version

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        """An `nvmlPciInfo_t`."""
        with self._device("nvmlDeviceGetPciInfo", handle) as gpu:
            info = pynvml.nvmlPciInfo_t()
            bus_id = gpu.pci_bus_id.encode()
            info.busId = bus_id
            info.busIdLegacy = bus_id
            info.domain = 0
            info.bus = int(gpu.pci_bus_id.split(":")[1], 16)
            info.device = 0
            info.pciDeviceId = gpu.model.pci_device_id
            info.pciSubSystemId = 0x16C110DE
            return info

    def nvmlDeviceGetPciInfo_v3(self, handle: Any) -> Any:
        """As nvmlDeviceGetPciInfo."""
        return self.nvmlDeviceGetPciInfo(handle)

    def nvmlDeviceGetSupportedClocksEventReasons(self, handle: Any) -> int:
        """Every reason bit this model can report."""
        with self._device("nvmlDeviceGetSupportedClocksEventReasons", handle):
            return ALL_REASONS

    def nvmlDeviceGetSupportedClocksThrottleReasons(self, handle: Any) -> int:
        """Deprecated name of nvmlDeviceGetSupportedClocksEventReasons."""
        with self._device("nvmlDeviceGetSupportedClocksThrottleReasons", handle):
            return ALL_REASONS

    # --- device: dynamic ---------------------------------------------------------------------------

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        """A `c_nvmlMemory_t` (v1: `used` includes the driver's reserve) or, with `version`, a
        `c_nvmlMemory_v2_t` (`used` excludes it, `reserved` says how much); bytes. A driver without
        nvmlDeviceGetMemoryInfo_v2 raises FUNCTION_NOT_FOUND for a versioned call, as pynvml does."""
        with self._any_device("nvmlDeviceGetMemoryInfo", handle) as (gpu, mig):
            if mig is not None:
                total, reserved, used = mig.memory_total_bytes, 0, mig.memory_used_bytes
            else:
                total, reserved, used = gpu.model.memory_total_bytes, gpu.model.memory_reserved_bytes, 0
                used = min(gpu.memory_used_total(), total - reserved)
            free = total - reserved - used
            if not version:
                return pynvml.c_nvmlMemory_t(total, free, used + reserved)
            if not gpu.memory_v2:
                raise self._error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            if version != pynvml.nvmlMemory_v2:
                raise self._error(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            return pynvml.c_nvmlMemory_v2_t(version, total, reserved, free, used)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """Core temperature (celsius)."""
        with self._device("nvmlDeviceGetTemperature", handle) as gpu:
            return self._temperature(gpu, sensor)

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int = 0) -> int:
        """Core temperature (celsius), versioned call."""
        with self._device("nvmlDeviceGetTemperatureV", handle) as gpu:
            return self._temperature(gpu, sensor)

    def _temperature(self, gpu: FakeGpu, sensor: int) -> int:
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return round(gpu.temperature)

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        """Current clock (MHz) of the SM, graphics or memory domain."""
        with self._device("nvmlDeviceGetClockInfo", handle) as gpu:
            if clock_type in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_GRAPHICS):
                return gpu.sm_clock_mhz()
            if clock_type == pynvml.NVML_CLOCK_MEM:
                return gpu.model.memory_clock_mhz
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Power draw in milliwatts."""
        with self._device("nvmlDeviceGetPowerUsage", handle) as gpu:
            return round(gpu.power_watts() * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        """Power limit in milliwatts."""
        with self._device("nvmlDeviceGetEnforcedPowerLimit", handle) as gpu:
            return round(gpu.model.power_limit_watts * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        """Energy since the driver loaded, in millijoules."""
        with self._device("nvmlDeviceGetTotalEnergyConsumption", handle) as gpu:
            return int(gpu.energy_mj)

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        """(correctable, uncorrectable, pending, failure); NOT_SUPPORTED on GPUs that retire pages."""
        with self._device("nvmlDeviceGetRemappedRows", handle) as gpu:
            if not gpu.model.row_remapping:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return (
                gpu.remapped_correctable,
                gpu.remapped_uncorrectable,
                int(gpu.remap_pending),
                int(gpu.remap_failure),
            )

    def nvmlDeviceGetViolationStatus(self, handle: Any, policy: int) -> Any:
        """A `c_nvmlViolationTime_t`: reference time (us) and time clocks were held back (ns)."""
        with self._device("nvmlDeviceGetViolationStatus", handle) as gpu:
            if policy not in VIOLATION_POLICIES:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            result = pynvml.c_nvmlViolationTime_t()
            result.referenceTime = EPOCH_US + gpu.updated_us
            result.violationTime = int(gpu.violation_ns.get(policy, 0.0))
            return result

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:
        """PCIe throughput over the last ~20 ms in KiB/s (the real call samples that long)."""
        with self._device("nvmlDeviceGetPcieThroughput", handle) as gpu:
            if counter not in (pynvml.NVML_PCIE_UTIL_TX_BYTES, pynvml.NVML_PCIE_UTIL_RX_BYTES):
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return gpu.pcie_kib_per_second(counter)

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        """[current, pending] MIG mode (1 enabled); NOT_SUPPORTED on models without MIG."""
        with self._device("nvmlDeviceGetMigMode", handle) as gpu:
            if not gpu.model.mig_profiles:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            mode = 1 if gpu.mig is not None else 0
            return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        """How many MIG devices the GPU can hold (0 outside MIG mode)."""
        with self._device("nvmlDeviceGetMaxMigDeviceCount", handle) as gpu:
            return MAX_MIG_DEVICES if gpu.mig is not None else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        """The handle of MIG device `index`: NOT_FOUND for an empty slot, INVALID_ARGUMENT outside MIG."""
        with self._device("nvmlDeviceGetMigDeviceHandleByIndex", handle) as gpu:
            if gpu.mig is None or not 0 <= index < MAX_MIG_DEVICES:
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if index >= len(gpu.mig):
                raise self._error(pynvml.NVML_ERROR_NOT_FOUND)
            return gpu.mig[index].handle

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any) -> int:
        """1 for a MIG device's handle, 0 for a GPU's."""
        with self._any_device("nvmlDeviceIsMigDeviceHandle", handle) as (_, mig):
            return 0 if mig is None else 1

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        """The GPU instance id of a MIG device (INVALID_ARGUMENT for a GPU's handle)."""
        with self._any_device("nvmlDeviceGetGpuInstanceId", handle) as (_, mig):
            if mig is None:
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return mig.gpu_instance

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        """The compute instance id of a MIG device (INVALID_ARGUMENT for a GPU's handle)."""
        with self._any_device("nvmlDeviceGetComputeInstanceId", handle) as (_, mig):
            if mig is None:
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            return mig.compute_instance

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        """Current PCIe generation."""
        with self._device("nvmlDeviceGetCurrPcieLinkGeneration", handle) as gpu:
            return gpu.model.pcie_generation

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        """Current PCIe width (lanes)."""
        with self._device("nvmlDeviceGetCurrPcieLinkWidth", handle) as gpu:
            return gpu.model.pcie_width

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        """Active clock-event reason bits."""
        with self._device("nvmlDeviceGetCurrentClocksEventReasons", handle) as gpu:
            return gpu.throttle_mask()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        """Deprecated name of nvmlDeviceGetCurrentClocksEventReasons."""
        with self._device("nvmlDeviceGetCurrentClocksThrottleReasons", handle) as gpu:
            return gpu.throttle_mask()

    def nvmlDeviceGetSamples(self, handle: Any, sampling_type: int, last_seen: int) -> tuple[int, list[Any]]:
        """(value type, [c_nvmlSample_t]) newer than `last_seen` (us); NOT_FOUND when there is none;
        NOT_SUPPORTED in MIG mode."""
        with self._device("nvmlDeviceGetSamples", handle) as gpu:
            if gpu.mig is not None:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            if sampling_type == pynvml.NVML_GPU_UTILIZATION_SAMPLES:
                buffer = gpu.utilization_samples
            elif sampling_type == pynvml.NVML_MEMORY_UTILIZATION_SAMPLES:
                buffer = gpu.memory_samples
            else:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            fresh = [s for s in buffer if s[0] > last_seen]
            if not fresh:
                raise self._error(pynvml.NVML_ERROR_NOT_FOUND)
            samples = (pynvml.c_nvmlSample_t * len(fresh))()
            for sample, (stamp, value) in zip(samples, fresh, strict=True):
                sample.timeStamp = stamp
                sample.sampleValue.uiVal = value
            return _UINT, samples[0 : len(fresh)]

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[Any]) -> Any:
        """An array of `c_nvmlFieldValue_t`; ids are ints or (field id, scope id) pairs."""
        meter = self._meter
        cost = meter.costs.field_values(field_ids) if meter is not None else None
        with self._device("nvmlDeviceGetFieldValues", handle, cost) as gpu:
            values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
            stamp = EPOCH_US + gpu.updated_us
            readers = self._field_readers(gpu)
            # filled through a plain twin of the struct over the same memory: pynvml's own __setattr__
            # (a Python method) made this call the fake's most expensive one
            plain = (_PlainFieldValue * len(field_ids)).from_buffer(values)
            for value, requested in zip(plain, field_ids, strict=True):
                field_id, scope = requested if isinstance(requested, tuple) else (requested, 0)
                value.fieldId = field_id
                value.scopeId = scope
                value.timestamp = stamp
                code = gpu.field_errors.get(field_id)
                if code is None:
                    code, value_type, number = self._field(gpu, readers, field_id, scope)
                    value.valueType = value_type
                    setattr(value.value, _VALUE_ATTR[value_type], number)
                value.nvmlReturn = code
            return values

    @staticmethod
    def _field_readers(gpu: FakeGpu) -> dict[int, tuple[int, Callable[[], float]]]:
        p = pynvml
        return {
            p.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: (_ULL, lambda: gpu.energy_mj),
            p.NVML_FI_DEV_MEMORY_TEMP: (_UINT, gpu.memory_temperature),
            p.NVML_FI_DEV_PCIE_REPLAY_COUNTER: (_UINT, lambda: gpu.pcie_replays),
            p.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: (_ULL, lambda: gpu.ecc_corrected),
            p.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (_ULL, lambda: gpu.ecc_uncorrected),
            p.NVML_FI_DEV_POWER_INSTANT: (_UINT, lambda: gpu.power_watts() * 1000),
            p.NVML_FI_DEV_POWER_CURRENT_LIMIT: (_UINT, lambda: gpu.model.power_limit_watts * 1000),
            p.NVML_FI_DEV_NVLINK_LINK_COUNT: (_UINT, lambda: gpu.model.nvlink_links),
            **(
                {
                    p.NVML_FI_DEV_REMAPPED_COR: (_UINT, lambda: gpu.remapped_correctable),
                    p.NVML_FI_DEV_REMAPPED_UNC: (_UINT, lambda: gpu.remapped_uncorrectable),
                    p.NVML_FI_DEV_REMAPPED_PENDING: (_UINT, lambda: int(gpu.remap_pending)),
                    p.NVML_FI_DEV_REMAPPED_FAILURE: (_UINT, lambda: int(gpu.remap_failure)),
                }
                if gpu.model.row_remapping
                else {
                    p.NVML_FI_DEV_RETIRED_SBE: (_ULL, lambda: gpu.retired_single_bit),
                    p.NVML_FI_DEV_RETIRED_DBE: (_ULL, lambda: gpu.retired_double_bit),
                    p.NVML_FI_DEV_RETIRED_PENDING: (_UINT, lambda: int(gpu.retired_pending)),
                }
            ),
        }

    @staticmethod
    def _field(
        gpu: FakeGpu, readers: dict[int, tuple[int, Callable[[], float]]], field_id: int, scope: int
    ) -> tuple[int, int, int]:
        """(return code, value type, value) of one field."""
        reader = readers.get(field_id)
        if reader is not None:
            return _SUCCESS, reader[0], round(reader[1]())
        if field_id == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
            counters = gpu.nvlink_tx_bytes
        elif field_id == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
            counters = gpu.nvlink_rx_bytes
        elif field_id in _NVLINK_ERROR_FIELDS:
            if not 0 <= scope < gpu.model.nvlink_links:
                return pynvml.NVML_ERROR_INVALID_ARGUMENT, _ULL, 0
            return _SUCCESS, _ULL, gpu.nvlink_errors.get((scope, field_id), 0)
        else:
            return pynvml.NVML_ERROR_NOT_SUPPORTED, _ULL, 0
        if not 0 <= scope < len(counters):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT, _ULL, 0
        return _SUCCESS, _ULL, int(counters[scope] // 1024)  # KiB

    # --- events --------------------------------------------------------------------------------------

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        """Event types this GPU can report (NOT_SUPPORTED when events are off)."""
        with self._device("nvmlDeviceGetSupportedEventTypes", handle) as gpu:
            if not gpu.events_supported:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return int(
                pynvml.nvmlEventTypeXidCriticalError
                | pynvml.nvmlEventTypeSingleBitEccError
                | pynvml.nvmlEventTypeDoubleBitEccError
            )

    def nvmlEventSetCreate(self) -> Any:
        """A new `c_nvmlEventSet_t`."""
        with self._api("nvmlEventSetCreate"):
            struct = pynvml.struct_c_nvmlEventSet_t()
            self._event_sets[ctypes.addressof(struct)] = _EventSet(struct)
            return ctypes.pointer(struct)

    def _event_set(self, event_set: Any) -> _EventSet:
        try:
            found = self._event_sets.get(ctypes.cast(event_set, ctypes.c_void_p).value or 0)
        except ctypes.ArgumentError:
            found = None
        if found is None:
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return found

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        """Watch `event_types` of this GPU in `event_set`."""
        with self._device("nvmlDeviceRegisterEvents", handle) as gpu:
            if not gpu.events_supported:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            watched = self._event_set(event_set)
            watched.registered[gpu.index] = watched.registered.get(gpu.index, 0) | int(event_types)

    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> Any:
        """The next `c_nvmlEventData_t`, waiting up to `timeout_ms` of real time; TIMEOUT when none."""
        with self._api("nvmlEventSetWait_v2"):
            watched = self._event_set(event_set)
            deadline = time.monotonic() + timeout_ms / 1000.0
            while not watched.pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._error(pynvml.NVML_ERROR_TIMEOUT)
                self._events.wait(remaining)
            gpu, event_type, event_data = watched.pending.popleft()
            data = pynvml.c_nvmlEventData_t()
            data.device = self._gpus[gpu].handle
            data.eventType = event_type
            data.eventData = event_data
            return data

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        """As nvmlEventSetWait_v2."""
        return self.nvmlEventSetWait_v2(event_set, timeout_ms)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        """Release an event set."""
        with self._api("nvmlEventSetFree"):
            watched = self._event_set(event_set)
            del self._event_sets[ctypes.addressof(watched.struct)]

    # --- GPM ---------------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        """A `c_nvmlGpmSupport_t`."""
        with self._device("nvmlGpmQueryDeviceSupport", handle) as gpu:
            support = pynvml.c_nvmlGpmSupport_t()
            support.version = pynvml.NVML_GPM_SUPPORT_VERSION
            support.isSupportedDevice = 1 if gpu.gpm_supported else 0
            return support

    def nvmlGpmSampleAlloc(self) -> Any:
        """A new `c_nvmlGpmSample_t`."""
        with self._api("nvmlGpmSampleAlloc"):
            struct = pynvml.struct_c_nvmlGpmSample_t()
            self._gpm_samples[ctypes.addressof(struct)] = [struct, None]
            return ctypes.pointer(struct)

    def _gpm_entry(self, sample: Any) -> list[Any]:
        try:
            entry = self._gpm_samples.get(ctypes.cast(sample, ctypes.c_void_p).value or 0)
        except ctypes.ArgumentError:
            entry = None
        if entry is None:
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return entry

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Release a GPM sample."""
        with self._api("nvmlGpmSampleFree"):
            entry = self._gpm_entry(sample)
            del self._gpm_samples[ctypes.addressof(entry[0])]

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        """Record this GPU's activity counters into `sample`."""
        with self._device("nvmlGpmSampleGet", handle) as gpu:
            if not gpu.gpm_supported:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            now = {
                "sm": gpu.sm_active,
                "tensor": gpu.tensor_active,
                "graphics": gpu.utilization,
                "dram": gpu.memory_bandwidth,
            }
            self._gpm_entry(sample)[1] = _GpmSnapshot(
                gpu.index,
                None,
                gpu.gpm_seconds,
                gpu.gpm_sm,
                gpu.gpm_tensor,
                gpu.gpm_graphics,
                gpu.gpm_dram,
                now,
            )
            return sample

    def nvmlGpmMigSampleGet(self, handle: Any, gpu_instance: int, sample: Any) -> Any:
        """Record the activity of GPU instance `gpu_instance` of a GPU in MIG mode into `sample`."""
        with self._device("nvmlGpmMigSampleGet", handle) as gpu:
            if not gpu.gpm_supported:
                raise self._error(pynvml.NVML_ERROR_NOT_SUPPORTED)
            device = next((d for d in gpu.mig or () if d.gpu_instance == gpu_instance), None)
            if device is None:
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            u = device.utilization
            self._gpm_entry(sample)[1] = _GpmSnapshot(
                gpu.index,
                gpu_instance,
                device.gpm_seconds,
                device.gpm_graphics,
                device.gpm_graphics / 2,
                device.gpm_graphics,
                0.0,
                {"sm": u, "tensor": u / 2, "graphics": u, "dram": 0.0},
            )
            return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        """Fill `request.metrics[:numMetrics]` from the activity between sample1 and sample2 (percent)."""
        with self._api("nvmlGpmMetricsGet"):
            if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
                raise self._error(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            first = self._gpm_entry(request.sample1)[1]
            second = self._gpm_entry(request.sample2)[1]
            if (
                first is None
                or second is None
                or (first.gpu, first.instance) != (second.gpu, second.instance)
            ):
                raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            for i in range(request.numMetrics):
                metric = request.metrics[i]
                metric.nvmlReturn, metric.value = self._gpm_metric(metric.metricId, first, second)
            return request

    @staticmethod
    def _gpm_metric(metric_id: int, first: _GpmSnapshot, second: _GpmSnapshot) -> tuple[int, float]:
        p = pynvml
        attr = {
            p.NVML_GPM_METRIC_SM_UTIL: "sm",
            p.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "tensor",
            p.NVML_GPM_METRIC_GRAPHICS_UTIL: "graphics",
            p.NVML_GPM_METRIC_DRAM_BW_UTIL: "dram",
        }.get(metric_id)
        if attr is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0
        elapsed = second.seconds - first.seconds
        if elapsed <= 0:  # no time between the samples: the limit of the ratio is the instant's activity
            return _SUCCESS, 100.0 * second.now[attr]
        active = getattr(second, attr) - getattr(first, attr)
        return _SUCCESS, 100.0 * active / elapsed
