"""An NVML-compatible fake: simulated GPUs behind pynvml's function names, structs, constants and errors.

`FakeNvml` answers the calls the exporter makes with the same shapes pynvml returns (ctypes handles,
`c_nvmlFieldValue_t` arrays, `c_nvmlMemory_t`, `c_nvmlSample_t` lists, `c_nvmlEventData_t`, GPM structs) and
raises pynvml's own `NVMLError` subclasses. Any pynvml constant, struct or error class is available as an
attribute (`fake.NVML_FI_DEV_MEMORY_TEMP is pynvml.NVML_FI_DEV_MEMORY_TEMP`); pynvml functions the fake does
not implement raise AttributeError.

Driving it (the simulation side):

    nvml = FakeNvml(gpu_count=8, model=H200_SXM)       # time from a ManualClock starting at 0
    nvml.set_load(0, utilization=0.9, tensor_active=0.6, memory_used_bytes=60 << 30)
    nvml.step(15.0)                                     # power, temperature, energy, counters, samples
    nvml.inject_xid(3, 79); nvml.lose_gpu(5); nvml.restore_gpu(5)
    nvml.inject_ecc(2, corrected=4); nvml.set_thermal_throttle(1, True)
    nvml.set_field_error(nvml.NVML_FI_DEV_MEMORY_TEMP)  # NOT_SUPPORTED on every GPU
    nvml.set_call_error("nvmlDeviceGetClockInfo", nvml.NVML_ERROR_UNKNOWN, gpu=0)  # None clears
    nvml.set_capabilities(2, gpm=False, events=False); nvml.fail_init()  # no driver
    nvml.hang("nvmlDeviceGetFieldValues")              # next such call blocks until release_hangs()

With `clock=time.monotonic` (or any callable) the state follows that clock instead, and `step` is not used.
Load is piecewise constant: each change first brings the state up to "now" with the old load; a GPU's state
is brought up to date when it is called. Power follows load, temperature follows power (20 s time
constant), energy integrates power, utilization samples are taken every 1/6 s (20 s kept), GPM metrics are
activity over the time between two samples. Hangs and event waits use real time (they block threads).
Calls are counted by name in `calls`.
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
)
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
        self._add_samples(t0_us, t1_us)

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
    seconds: float
    sm: float
    tensor: float
    graphics: float
    dram: float
    now: dict[str, float]


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


class FakeNvml:
    """Simulated NVML with `gpu_count` GPUs of one model; see the module docstring for the driving API."""

    def __init__(
        self,
        gpu_count: int = 8,
        model: GpuModel = H200_SXM,
        clock: Callable[[], float] | None = None,
        driver_version: str = "550.90.07",
        uuid_seed: str = "ibpool-fake-node",
    ) -> None:
        self._clock: Callable[[], float] = clock if clock is not None else ManualClock()
        self.driver_version = driver_version
        self._lock = threading.RLock()
        self._events = threading.Condition(self._lock)
        self._refcount = 0
        self._init_error: int | None = None
        self._hangs: dict[str, list[Any]] = {}  # name -> [remaining calls, seconds or None]
        self._release = threading.Event()
        self.blocked = 0  # calls now blocked by hang()
        self.calls: Counter[str] = Counter()  # every API call by name
        self._event_sets: dict[int, _EventSet] = {}
        self._gpm_samples: dict[int, list[Any]] = {}  # address -> [struct, _GpmSnapshot | None]
        self._gpus = [self._make_gpu(i, model, uuid_seed) for i in range(gpu_count)]
        self._by_handle = {ctypes.addressof(g.handle_struct): g for g in self._gpus}
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

    def set_capabilities(self, gpu: int, *, gpm: bool | None = None, events: bool | None = None) -> None:
        """Turn GPM or event support of GPU `gpu` on or off."""
        with self._lock:
            g = self._gpus[gpu]
            if gpm is not None:
                g.gpm_supported = gpm
            if events is not None:
                g.events_supported = events

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

    def release_hangs(self) -> None:
        """Unblock every hung call and cancel pending hangs."""
        with self._lock:
            self._hangs.clear()
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

    @contextmanager
    def _device(self, call: str, handle: Any) -> Iterator[FakeGpu]:
        """Enter a device call: as _api, then the GPU behind `handle` (brought up to now), lost, errors."""
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
        try:
            address = ctypes.cast(handle, ctypes.c_void_p).value
        except ctypes.ArgumentError:
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT) from None
        gpu = self._by_handle.get(address or 0)
        if gpu is None:
            raise self._error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu

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
        """The product name."""
        with self._device("nvmlDeviceGetName", handle) as gpu:
            return gpu.model.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """The GPU's UUID (GPU-...)."""
        with self._device("nvmlDeviceGetUUID", handle) as gpu:
            return gpu.uuid

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
        """A `c_nvmlMemory_t` (bytes)."""
        with self._device("nvmlDeviceGetMemoryInfo", handle) as gpu:
            total = gpu.model.memory_total_bytes
            return pynvml.c_nvmlMemory_t(total, total - gpu.memory_used_bytes, gpu.memory_used_bytes)

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
        """(value type, [c_nvmlSample_t]) newer than `last_seen` (us); NOT_FOUND when there is none."""
        with self._device("nvmlDeviceGetSamples", handle) as gpu:
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
        with self._device("nvmlDeviceGetFieldValues", handle) as gpu:
            values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
            stamp = EPOCH_US + gpu.updated_us
            readers = self._field_readers(gpu)
            for value, requested in zip(values, field_ids, strict=True):
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
                gpu.index, gpu.gpm_seconds, gpu.gpm_sm, gpu.gpm_tensor, gpu.gpm_graphics, gpu.gpm_dram, now
            )
            return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        """Fill `request.metrics[:numMetrics]` from the activity between sample1 and sample2 (percent)."""
        with self._api("nvmlGpmMetricsGet"):
            if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
                raise self._error(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            first = self._gpm_entry(request.sample1)[1]
            second = self._gpm_entry(request.sample2)[1]
            if first is None or second is None or first.gpu != second.gpu:
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
