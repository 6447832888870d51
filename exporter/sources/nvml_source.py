"""NVML source: reads a GPU into a frozen `GpuSnapshot` in base units (bytes, watts, joules, celsius, hertz).

The NVML object (`pynvml`, or `simulator.fake_nvml.FakeNvml`) is a constructor argument; the first read runs
`nvmlInit`. `read_gpu` reads one GPU fast or slow (docs/gpu-collector.md), `read()` every GPU, slow.

Rules:
- NOT_SUPPORTED omits the value (None, never 0) and is no error; other failures omit it and are counted.
- A lost GPU gives `up=False` with its last static facts and a new `epoch`; the next read tries it again.
- Reads of different GPUs may run in parallel, one thread per GPU: a GPU's state is its own, what the GPUs
  share (error counts, fallbacks) is locked.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exporter.errors import SourceError
from exporter.sources.gpu_snapshot import GpuInfo, GpuSnapshot, Total
from exporter.sources.nvml_gpm import GpmPair, free_sample, open_pair
from exporter.sources.nvml_mig import MigDevices

log = logging.getLogger(__name__)

Nvml = Any
"""The `pynvml` module or an object with the same function names, constants, structs and errors."""

MAX_STALE_SECONDS = 10.0

# Clock-event (throttle) reason bits, the values of pynvml's nvmlClocksEventReason* constants (NVML ABI).
THROTTLE_REASONS: tuple[tuple[str, int], ...] = (
    ("gpu_idle", 0x001),
    ("applications_clocks_setting", 0x002),
    ("sw_power_cap", 0x004),
    ("hw_slowdown", 0x008),
    ("sync_boost", 0x010),
    ("sw_thermal_slowdown", 0x020),
    ("hw_thermal_slowdown", 0x040),
    ("hw_power_brake_slowdown", 0x080),
    ("display_clock_setting", 0x100),
)
# nvmlDeviceGetViolationStatus policies (the values of pynvml's NVML_PERF_POLICY_* constants, NVML ABI).
VIOLATION_POLICIES: tuple[tuple[str, int], ...] = (
    ("power", 0),
    ("thermal", 1),
    ("sync_boost", 2),
    ("board_limit", 3),
    ("low_utilization", 4),
    ("reliability", 5),
)

# Union member of c_nvmlValue_t for each NVML_VALUE_TYPE_* (double, uint, ulong, ulonglong, slonglong, ...).
_VALUE_ATTRS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

# (snapshot attribute, NVML field constant name, scale to base units), read on every read.
_FAST_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("memory_temperature_celsius", "NVML_FI_DEV_MEMORY_TEMP", 1),
    ("power_watts", "NVML_FI_DEV_POWER_INSTANT", 1e-3),  # mW, scope 0 = NVML_POWER_SCOPE_GPU
    ("power_limit_watts", "NVML_FI_DEV_POWER_CURRENT_LIMIT", 1e-3),  # mW
)
# Read on slow reads only: expensive (energy, PCIe replays) or slow-moving.
_SLOW_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("energy_joules", "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),  # mJ
    ("pcie_replay_errors", "NVML_FI_DEV_PCIE_REPLAY_COUNTER", 1),
    ("ecc_corrected_errors", "NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 1),
    ("ecc_uncorrected_errors", "NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 1),
)
_REMAP_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("remapped_rows_correctable", "NVML_FI_DEV_REMAPPED_COR", 1),
    ("remapped_rows_uncorrectable", "NVML_FI_DEV_REMAPPED_UNC", 1),
    ("row_remap_pending", "NVML_FI_DEV_REMAPPED_PENDING", 1),
    ("row_remap_failure", "NVML_FI_DEV_REMAPPED_FAILURE", 1),
)
_RETIRED_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("retired_pages_single_bit", "NVML_FI_DEV_RETIRED_SBE", 1),
    ("retired_pages_double_bit", "NVML_FI_DEV_RETIRED_DBE", 1),
    ("retired_pages_pending", "NVML_FI_DEV_RETIRED_PENDING", 1),
)
_NVLINK_ERRORS: tuple[tuple[str, str], ...] = (
    ("crc", "NVML_FI_DEV_NVLINK_ERROR_DL_CRC"),
    ("replay", "NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY"),
    ("recovery", "NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY"),
)
_GPM_METRICS = (
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL"),
    ("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
)
_SCALAR, _NVLINK_TX, _NVLINK_RX, _NVLINK_ERROR = range(4)
_KIB = 1024


class NvmlErrorCounts:
    """Failed NVML calls by (call, error); shared by the source and the XID watcher, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, call: str, error: str) -> bool:
        """Count one failure; True when this (call, error) pair is new (worth a warning)."""
        key = (call, error)
        with self._lock:
            count = self._counts.get(key, 0)
            self._counts[key] = count + 1
        return count == 0

    def snapshot(self) -> dict[tuple[str, str], int]:
        """A copy of the counts."""
        with self._lock:
            return dict(self._counts)


def error_name(nvml: Nvml, code: int) -> str:
    """A short, stable name for an NVML return code: `GpuIsLost`, `NotSupported`, ... ."""
    name = type(nvml.NVMLError(code)).__name__
    return name.removeprefix("NVMLError_") if name != "NVMLError" else f"Code{code}"


def handle_key(handle: Any) -> int | None:
    """The address a device handle (a ctypes pointer) points at, to compare handles."""
    return ctypes.cast(handle, ctypes.c_void_p).value


def _code(exc: Exception) -> int:
    return int(getattr(exc, "value", -1))


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)


class _Fallback:
    """The first of several equivalent NVML functions that both the bindings and the driver provide."""

    def __init__(self, nvml: Nvml, *names: str) -> None:
        self._candidates = [(n, getattr(nvml, n)) for n in names if hasattr(nvml, n)]
        self._not_found: type[Exception] = nvml.NVMLError_FunctionNotFound
        self._lock = threading.Lock()
        self.name = self._candidates[0][0] if self._candidates else names[0]

    def __call__(self, *args: Any) -> Any:
        while True:
            with self._lock:
                if not self._candidates:
                    raise AttributeError(f"NVML bindings lack {self.name}")
                name, fn = self._candidates[0]
            try:
                return fn(*args)
            except self._not_found:
                with self._lock:
                    if len(self._candidates) == 1:
                        raise
                    if self._candidates[0][0] == name:  # another thread may have switched already
                        log.info("NVML driver lacks %s; using %s", name, self._candidates[1][0])
                        self._candidates.pop(0)
                        self.name = self._candidates[0][0]


_SampleFields = tuple[Callable[[Any], int], Callable[[Any], Any]]


def _sample_fields(nvml: Nvml) -> _SampleFields:
    """Getters for c_nvmlSample_t's fields that skip pynvml's per-attribute bytes decoding (3x faster)."""
    struct = nvml.c_nvmlSample_t
    return struct.timeStamp.__get__, struct.sampleValue.__get__


def _plain_struct(struct: Any) -> Any:
    """A plain ctypes twin of a pynvml struct (same layout, no Python-level __getattribute__)."""
    return type(f"_Plain{struct.__name__}", (ctypes.Structure,), {"_fields_": struct._fields_})


class _SampleWindow:
    """Averages the utilization samples of one kind newer than the last one seen, and keeps running totals."""

    __slots__ = ("count", "last_average", "last_new_at", "last_timestamp", "total")

    def __init__(self) -> None:
        self.last_timestamp = 0
        self.last_average: float | None = None
        self.last_new_at = 0.0  # the reader's clock when new samples last arrived
        self.total = 0.0  # every sample seen (0-1) since the GPU was found
        self.count = 0

    def update(self, value_type: int, samples: list[Any], fields: _SampleFields, now: float) -> float | None:
        """The mean (0-1) of the new samples (NVML reports percent), or the stale fallback."""
        attr = _VALUE_ATTRS[value_type]
        stamp_of, value_of = fields
        last = newest = self.last_timestamp
        total = 0.0
        count = 0
        for sample in samples:
            stamp = stamp_of(sample)
            if stamp > last:
                total += getattr(value_of(sample), attr)
                count += 1
                newest = max(newest, stamp)
        if count:
            self.last_timestamp = newest
            self.last_average = total / count / 100.0
            self.last_new_at = now
            self.total += total / 100.0
            self.count += count
            return self.last_average
        return self.no_new_samples(now)

    def no_new_samples(self, now: float) -> float | None:
        """Repeat the previous average while it is recent, then give up."""
        return self.last_average if now - self.last_new_at <= MAX_STALE_SECONDS else None

    def running_total(self) -> Total | None:
        """(sum of samples, number of samples) so far, None before the first."""
        return (self.total, float(self.count)) if self.count else None

    def reset(self) -> None:
        """Forget everything (the GPU was lost)."""
        self.last_timestamp = 0
        self.last_average = None
        self.last_new_at = 0.0
        self.total = 0.0
        self.count = 0


@dataclass
class _FieldPlan:
    """The field ids of a batched read and what each answer is: (kind, snapshot key or link type, link,
    scale)."""

    ids: list[tuple[int, int]] = field(default_factory=list)
    keys: list[tuple[int, str, int, float]] = field(default_factory=list)

    def add(self, field_id: int, scope: int, kind: int, key: str, scale: float) -> None:
        self.ids.append((field_id, scope))
        self.keys.append((kind, key, scope, scale))

    def __add__(self, other: _FieldPlan) -> _FieldPlan:
        return _FieldPlan(self.ids + other.ids, self.keys + other.keys)


@dataclass
class _GpuState:
    """What the source remembers about one GPU between reads."""

    index: int
    handle: Any = None
    info: GpuInfo | None = None
    epoch: int = 0
    refresh_static: bool = True
    lost: bool = False
    fast_fields: _FieldPlan = field(default_factory=_FieldPlan)
    all_fields: _FieldPlan = field(default_factory=_FieldPlan)
    reasons: tuple[tuple[str, int], ...] = THROTTLE_REASONS
    violations: tuple[tuple[str, int], ...] = VIOLATION_POLICIES
    pcie_throughput: bool = True
    memory_version: int = 2
    gpm: GpmPair | None = None
    mig: MigDevices | None = None
    mig_supported: bool = True
    mig_enabled: bool | None = None
    slow: dict[str, Any] = field(default_factory=dict)  # the last slow read's values
    utilization: _SampleWindow = field(default_factory=_SampleWindow)
    memory_bandwidth: _SampleWindow = field(default_factory=_SampleWindow)


class NvmlSource:
    """Reads GPUs through an NVML object; see the module docstring for the rules.

    `open()` once, then `read_gpu(i)` from at most one thread per GPU at a time (or `read()` from one).
    """

    def __init__(
        self, nvml: Nvml, errors: NvmlErrorCounts | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._nvml = nvml
        self._clock = clock
        self.errors = errors if errors is not None else NvmlErrorCounts()
        self._error: type[Exception] = nvml.NVMLError
        self._lost: type[Exception] = nvml.NVMLError_GpuIsLost
        self._not_supported = int(nvml.NVML_ERROR_NOT_SUPPORTED)
        self._not_found: type[Exception] = nvml.NVMLError_NotFound
        self._no_memory_v2: tuple[type[Exception], ...] = (
            nvml.NVMLError_FunctionNotFound,
            nvml.NVMLError_ArgumentVersionMismatch,
            nvml.NVMLError_NotSupported,
        )
        self._memory_v2 = getattr(nvml, "nvmlMemory_v2", None)
        self._temperature = _Fallback(nvml, "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature")
        self._current_reasons = _Fallback(
            nvml, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"
        )
        self._supported_reasons = _Fallback(
            nvml, "nvmlDeviceGetSupportedClocksEventReasons", "nvmlDeviceGetSupportedClocksThrottleReasons"
        )
        self._has_gpm = hasattr(nvml, "nvmlGpmQueryDeviceSupport")
        self._sample_fields = _sample_fields(nvml)
        self._plain_field_value = _plain_struct(nvml.c_nvmlFieldValue_t)
        self._error_names: dict[int, str] = {}
        self._gpus: list[_GpuState] = []
        self._driver_version = ""
        self._opened = False
        self._open_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def device_count(self) -> int:
        """GPUs found by `open()` (0 before)."""
        return len(self._gpus)

    def open(self) -> None:
        """nvmlInit and count the GPUs; raises SourceError when NVML is unavailable. Idempotent."""
        with self._open_lock:
            if self._opened:
                return
            nvml = self._nvml
            try:
                nvml.nvmlInit()
            except self._error as exc:
                raise SourceError(f"NVML unavailable: {exc} ({type(exc).__name__})") from exc
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except self._error as exc:
                self._shutdown()
                raise SourceError(f"nvmlDeviceGetCount failed: {exc} ({type(exc).__name__})") from exc
            self._driver_version = _text(
                self._try(-1, "nvmlSystemGetDriverVersion", nvml.nvmlSystemGetDriverVersion)
            )
            self._gpus = [_GpuState(i, memory_version=2 if self._memory_v2 else 1) for i in range(count)]
            self._opened = True
            log.info("NVML opened: %d GPUs, driver %s", count, self._driver_version)

    def close(self) -> None:
        """Free GPM buffers and nvmlShutdown. Safe to call twice; no read may be running."""
        with self._open_lock:
            if not self._opened:
                return
            for state in self._gpus:
                self._free_gpu(state)
            self._gpus = []
            self._opened = False
            self._shutdown()

    def _shutdown(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._error as exc:
            log.warning("nvmlShutdown failed: %s", exc)

    # --- reading ---------------------------------------------------------------------------------

    def read(self) -> list[GpuSnapshot]:
        """Every GPU, slow reads, in index order; raises SourceError only when NVML itself is unavailable."""
        self.open()
        return [self.read_gpu(i) for i in range(len(self._gpus))]

    def read_gpu(self, index: int, slow: bool = True) -> GpuSnapshot:
        """One GPU: a slow read (everything) or a fast one (the slow values of the last slow read)."""
        self.open()
        return self._read_gpu(self._gpus[index], slow)

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index` (None if unknown), e.g. for the job collector."""
        if 0 <= index < len(self._gpus):
            info = self._gpus[index].info
            return info.uuid if info is not None and info.uuid else None
        return None

    def _read_gpu(self, state: _GpuState, slow: bool) -> GpuSnapshot:
        if state.handle is None:
            try:
                state.handle = self._nvml.nvmlDeviceGetHandleByIndex(state.index)
            except self._error as exc:  # GPU_IS_LOST, UNKNOWN, NO_PERMISSION, ...: not reachable
                if not isinstance(exc, self._lost):
                    self._failed(state.index, "nvmlDeviceGetHandleByIndex", _code(exc))
                return self._mark_lost(state, exc)
        try:
            if state.refresh_static:
                self._read_static(state)
                slow = True
            snapshot = self._read_dynamic(state, slow)
        except self._lost as exc:
            return self._mark_lost(state, exc)
        if state.lost:
            log.warning("GPU %d answers again", state.index)
            state.lost = False
        return snapshot

    def _mark_lost(self, state: _GpuState, exc: Exception) -> GpuSnapshot:
        if not state.lost:
            log.warning("GPU %d is lost or unreachable: %s (%s)", state.index, exc, type(exc).__name__)
            state.epoch += 1
        state.lost = True
        self._free_gpu(state)
        state.handle = None
        state.refresh_static = True
        state.slow = {}
        state.utilization.reset()
        state.memory_bandwidth.reset()
        return GpuSnapshot(state.index, False, state.info, state.epoch)

    def _read_static(self, state: _GpuState) -> None:
        nvml, handle, i = self._nvml, state.handle, state.index
        uuid = self._try(i, "nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, handle)
        name = self._try(i, "nvmlDeviceGetName", nvml.nvmlDeviceGetName, handle)
        pci = self._try(i, "nvmlDeviceGetPciInfo", nvml.nvmlDeviceGetPciInfo, handle)
        vbios = self._try(i, "nvmlDeviceGetVbiosVersion", nvml.nvmlDeviceGetVbiosVersion, handle)
        bus_id = _text(pci.busId) if pci is not None else ""
        state.info = GpuInfo(_text(name), _text(uuid), bus_id, self._driver_version, _text(vbios))
        self._plan_fields(state, self._nvlink_count(state), self._remaps_rows(state))
        state.reasons = self._read_supported_reasons(state)
        state.violations = VIOLATION_POLICIES if hasattr(nvml, "nvmlDeviceGetViolationStatus") else ()
        state.pcie_throughput = hasattr(nvml, "nvmlDeviceGetPcieThroughput")
        state.gpm = self._open_gpm(state)
        state.mig_supported = hasattr(nvml, "nvmlDeviceGetMigMode")
        state.refresh_static = False

    def _follow_mig_mode(self, state: _GpuState) -> None:
        """Read the MIG mode (slow reads: it changes with a GPU reset) and keep the MIG devices in step."""
        i = state.index
        mode = self._try_supported(i, "nvmlDeviceGetMigMode", self._nvml.nvmlDeviceGetMigMode, state.handle)
        if mode is _UNSUPPORTED:
            state.mig_supported = False
        enabled = None if mode is None or mode is _UNSUPPORTED else bool(mode[0])
        if enabled and state.mig is None:
            state.mig = MigDevices(
                self._nvml,
                lambda call, fn, *args: self._try(i, call, fn, *args),
                lambda key, code: self._field_failed(i, key, code, call="nvmlGpmMetricsGet"),
                gpm=state.gpm is not None,
            )
        elif not enabled and state.mig is not None:
            state.mig.close()
            state.mig = None
        state.mig_enabled = enabled

    def _nvlink_count(self, state: _GpuState) -> int:
        nvml = self._nvml
        values = self._try(
            state.index,
            "nvmlDeviceGetFieldValues",
            nvml.nvmlDeviceGetFieldValues,
            state.handle,
            [nvml.NVML_FI_DEV_NVLINK_LINK_COUNT],
        )
        if values is None:
            return 0
        value = values[0]
        if value.nvmlReturn != 0:
            self._field_failed(state.index, "nvlink_link_count", value.nvmlReturn)
            return 0
        return int(getattr(value.value, _VALUE_ATTRS[value.valueType]))

    def _remaps_rows(self, state: _GpuState) -> bool:
        """Whether the GPU remaps rows (Ampere+); if not, it retires pages instead."""
        nvml = self._nvml
        if not hasattr(nvml, "nvmlDeviceGetRemappedRows"):
            return True  # the fields tell (NOT_SUPPORTED omits them)
        try:
            nvml.nvmlDeviceGetRemappedRows(state.handle)
        except self._lost:
            raise
        except self._error as exc:
            return _code(exc) != self._not_supported
        return True

    def _plan_fields(self, state: _GpuState, links: int, remaps_rows: bool) -> None:
        nvml = self._nvml
        fast, slow = _FieldPlan(), _FieldPlan()
        for key, constant, scale in _FAST_FIELDS:
            fast.add(getattr(nvml, constant), 0, _SCALAR, key, scale)
        for kind, constant in (
            (_NVLINK_TX, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX"),
            (_NVLINK_RX, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX"),
        ):
            for link in range(links):
                fast.add(getattr(nvml, constant), link, kind, "", _KIB)
        for key, constant, scale in (*_SLOW_FIELDS, *(_REMAP_FIELDS if remaps_rows else _RETIRED_FIELDS)):
            slow.add(getattr(nvml, constant), 0, _SCALAR, key, scale)
        for link in range(links):
            for kind_name, constant in _NVLINK_ERRORS:
                if hasattr(nvml, constant):
                    slow.add(getattr(nvml, constant), link, _NVLINK_ERROR, kind_name, 1)
        state.fast_fields = fast
        state.all_fields = fast + slow

    def _read_supported_reasons(self, state: _GpuState) -> tuple[tuple[str, int], ...]:
        mask = self._try(state.index, self._supported_reasons.name, self._supported_reasons, state.handle)
        if mask is None:
            return THROTTLE_REASONS
        return tuple((name, bit) for name, bit in THROTTLE_REASONS if mask & bit)

    def _open_gpm(self, state: _GpuState) -> GpmPair | None:
        if not self._has_gpm:
            return None
        nvml, i = self._nvml, state.index
        support = self._try(i, "nvmlGpmQueryDeviceSupport", nvml.nvmlGpmQueryDeviceSupport, state.handle)
        if support is None or not support.isSupportedDevice:
            return None
        return open_pair(
            nvml,
            lambda: self._try(i, "nvmlGpmSampleAlloc", nvml.nvmlGpmSampleAlloc),
            lambda sample: free_sample(nvml, sample),
            _GPM_METRICS,
        )

    def _free_gpu(self, state: _GpuState) -> None:
        gpm, state.gpm = state.gpm, None
        if gpm is not None:
            free_sample(self._nvml, gpm.previous)
            free_sample(self._nvml, gpm.current)
        mig, state.mig = state.mig, None
        if mig is not None:
            mig.close()

    def _read_dynamic(self, state: _GpuState, slow: bool) -> GpuSnapshot:
        nvml, handle, i = self._nvml, state.handle, state.index
        v: dict[str, Any] = {}
        if slow:
            state.slow = self._read_slow(state)
        self._read_fields(state, v, state.slow if slow else None)
        self._read_power_fallbacks(state, v)
        v["utilization_ratio"] = self._average(state, state.utilization, nvml.NVML_GPU_UTILIZATION_SAMPLES)
        v["memory_bandwidth_utilization_ratio"] = self._average(
            state, state.memory_bandwidth, nvml.NVML_MEMORY_UTILIZATION_SAMPLES
        )
        v["utilization_total"] = state.utilization.running_total()
        v["memory_bandwidth_total"] = state.memory_bandwidth.running_total()
        self._read_memory(state, v)
        v["temperature_celsius"] = self._try(
            i, self._temperature.name, self._temperature, handle, nvml.NVML_TEMPERATURE_GPU
        )
        for key, clock_type in (
            ("sm_clock_hertz", nvml.NVML_CLOCK_SM),
            ("memory_clock_hertz", nvml.NVML_CLOCK_MEM),
        ):
            clock = self._try(i, "nvmlDeviceGetClockInfo", nvml.nvmlDeviceGetClockInfo, handle, clock_type)
            if clock is not None:
                v[key] = clock * 1_000_000
        v["pcie_link_generation"] = self._try(
            i, "nvmlDeviceGetCurrPcieLinkGeneration", nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle
        )
        v["pcie_link_width"] = self._try(
            i, "nvmlDeviceGetCurrPcieLinkWidth", nvml.nvmlDeviceGetCurrPcieLinkWidth, handle
        )
        mask = self._try(i, self._current_reasons.name, self._current_reasons, handle)
        if mask is not None:
            v["throttle_reasons"] = tuple((name, bool(mask & bit)) for name, bit in state.reasons)
        if state.gpm is not None:
            self._read_gpm(state, state.gpm, v)
        v["mig_enabled"] = state.mig_enabled
        if state.mig is not None:
            v["mig_instances"] = state.mig.read(handle, self._clock())
        return GpuSnapshot(i, True, state.info, state.epoch, **{**state.slow, **v})

    def _read_slow(self, state: _GpuState) -> dict[str, Any]:
        """Violation time, PCIe throughput and the MIG device list (the slow fields come with the batch)."""
        nvml, handle, i = self._nvml, state.handle, state.index
        slow: dict[str, Any] = {}
        violations: list[tuple[str, float]] = []
        supported: list[tuple[str, int]] = []
        for reason, policy in state.violations:
            result = self._try_supported(
                i, "nvmlDeviceGetViolationStatus", nvml.nvmlDeviceGetViolationStatus, handle, policy
            )
            if result is _UNSUPPORTED:
                continue
            supported.append((reason, policy))
            if result is not None:
                violations.append((reason, int(result.violationTime) / 1e9))
        state.violations = tuple(supported)
        slow["clock_event_violation_seconds"] = tuple(violations)
        if state.pcie_throughput:
            for key, counter in (
                ("pcie_transmit_bytes_per_second", nvml.NVML_PCIE_UTIL_TX_BYTES),
                ("pcie_receive_bytes_per_second", nvml.NVML_PCIE_UTIL_RX_BYTES),
            ):
                kib = self._try_supported(
                    i, "nvmlDeviceGetPcieThroughput", nvml.nvmlDeviceGetPcieThroughput, handle, counter
                )
                if kib is _UNSUPPORTED:
                    state.pcie_throughput = False
                    break
                if kib is not None:
                    slow[key] = float(kib * _KIB)
        if state.mig_supported:
            self._follow_mig_mode(state)
        if state.mig is not None:
            state.mig.refresh(handle)
        return slow

    def _read_memory(self, state: _GpuState, v: dict[str, Any]) -> None:
        nvml, handle, i = self._nvml, state.handle, state.index
        if state.memory_version == 2:
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle, self._memory_v2)
            except self._no_memory_v2 as exc:
                log.info(
                    "GPU %d: no nvmlDeviceGetMemoryInfo_v2 (%s); memory used includes the reserve", i, exc
                )
                state.memory_version = 1
            except self._lost:
                raise
            except self._error as exc:
                self._failed(i, "nvmlDeviceGetMemoryInfo_v2", _code(exc))
                return
            else:
                v["memory_used_bytes"] = int(memory.used)
                v["memory_total_bytes"] = int(memory.total)
                v["memory_reserved_bytes"] = int(memory.reserved)
                v["memory_info_version"] = 2
                return
        memory = self._try(i, "nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is not None:
            v["memory_used_bytes"] = int(memory.used)
            v["memory_total_bytes"] = int(memory.total)
            v["memory_info_version"] = 1

    def _read_fields(self, state: _GpuState, v: dict[str, Any], slow: dict[str, Any] | None) -> None:
        """The batched field read: fast values into `v`, and the slow ones into `slow` when given."""
        plan = state.all_fields if slow is not None else state.fast_fields
        values = self._try(
            state.index,
            "nvmlDeviceGetFieldValues",
            self._nvml.nvmlDeviceGetFieldValues,
            state.handle,
            plan.ids,
        )
        if values is None:
            return
        tx: list[tuple[int, int]] = []
        rx: list[tuple[int, int]] = []
        nvlink_errors: list[tuple[int, str, int]] = []
        fast_keys = {key for key, _, _ in _FAST_FIELDS}
        for value, (kind, key, link, scale) in zip(self._plain(values), plan.keys, strict=True):
            if value.nvmlReturn != 0:
                self._field_failed(
                    state.index, key if kind != _NVLINK_ERROR else f"nvlink_{key}", value.nvmlReturn
                )
                continue
            number = getattr(value.value, _VALUE_ATTRS[value.valueType]) * scale
            if kind == _NVLINK_TX:
                tx.append((link, int(number)))
            elif kind == _NVLINK_RX:
                rx.append((link, int(number)))
            elif kind == _NVLINK_ERROR:
                nvlink_errors.append((link, key, int(number)))
            elif key in fast_keys:
                v[key] = number
            elif slow is not None:
                slow[key] = number if scale != 1 else int(number)
        v["nvlink_transmitted_bytes"] = tuple(tx)
        v["nvlink_received_bytes"] = tuple(rx)
        if slow is not None:
            slow["nvlink_errors"] = tuple(nvlink_errors)

    def _plain(self, values: Any) -> Any:
        """The field value array seen through the plain struct (a view, no copy) when it is a ctypes array."""
        try:
            return (self._plain_field_value * len(values)).from_buffer(values)
        except TypeError:
            return values

    def _read_power_fallbacks(self, state: _GpuState, v: dict[str, Any]) -> None:
        """Drivers without the power fields still answer the older calls (milliwatts)."""
        nvml, i, handle = self._nvml, state.index, state.handle
        if "power_watts" not in v:
            milliwatts = self._try(i, "nvmlDeviceGetPowerUsage", nvml.nvmlDeviceGetPowerUsage, handle)
            if milliwatts is not None:
                v["power_watts"] = milliwatts / 1000
        if "power_limit_watts" not in v:
            milliwatts = self._try(
                i, "nvmlDeviceGetEnforcedPowerLimit", nvml.nvmlDeviceGetEnforcedPowerLimit, handle
            )
            if milliwatts is not None:
                v["power_limit_watts"] = milliwatts / 1000

    def _average(self, state: _GpuState, window: _SampleWindow, sampling_type: int) -> float | None:
        try:
            value_type, samples = self._nvml.nvmlDeviceGetSamples(
                state.handle, sampling_type, window.last_timestamp
            )
        except self._not_found:
            return window.no_new_samples(self._clock())
        except self._lost:
            raise
        except self._error as exc:
            self._failed(state.index, "nvmlDeviceGetSamples", _code(exc))
            return None
        return window.update(value_type, samples, self._sample_fields, self._clock())

    def _read_gpm(self, state: _GpuState, gpm: GpmPair, v: dict[str, Any]) -> None:
        nvml, i = self._nvml, state.index
        got = gpm.take(
            lambda sample: self._try(i, "nvmlGpmSampleGet", nvml.nvmlGpmSampleGet, state.handle, sample),
            lambda request: self._try(i, "nvmlGpmMetricsGet", nvml.nvmlGpmMetricsGet, request),
            self._clock(),
            lambda key, code: self._field_failed(i, key, code, call="nvmlGpmMetricsGet"),
        )
        for key, (ratio, total) in got.items():
            v[f"{key}_ratio"] = ratio
            v[f"{key}_total"] = total

    # --- errors ----------------------------------------------------------------------------------

    def _try(self, gpu: int, call: str, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)`, or None when it fails with anything but GPU_IS_LOST (which propagates)."""
        try:
            return fn(*args)
        except self._lost:
            raise
        except self._error as exc:
            self._failed(gpu, call, _code(exc))
            return None

    def _try_supported(self, gpu: int, call: str, fn: Callable[..., Any], *args: Any) -> Any:
        """As `_try`, but `_UNSUPPORTED` when the answer is NOT_SUPPORTED (a capability to remember)."""
        try:
            return fn(*args)
        except self._lost:
            raise
        except self._error as exc:
            if _code(exc) == self._not_supported:
                return _UNSUPPORTED
            self._failed(gpu, call, _code(exc))
            return None

    def _field_failed(self, gpu: int, key: str, code: int, call: str = "nvmlDeviceGetFieldValues") -> None:
        if code == self._nvml.NVML_ERROR_GPU_IS_LOST:
            raise self._nvml.NVMLError(code)
        self._failed(gpu, f"{call}:{key}", code)

    def _failed(self, gpu: int, call: str, code: int) -> None:
        """Count and log a failed call; NOT_SUPPORTED is a capability, not a failure."""
        if code == self._not_supported:
            return
        name = self._error_names.get(code)
        if name is None:
            name = self._error_names[code] = error_name(self._nvml, code)
        if self.errors.add(call, name):
            log.warning("NVML %s failed on GPU %d: %s", call, gpu, name)
        else:
            log.debug("NVML %s failed on GPU %d: %s", call, gpu, name)


_UNSUPPORTED = object()
