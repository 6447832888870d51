"""NVML source: reads every GPU into a frozen snapshot in base units (bytes, watts, joules, celsius, hertz).

The NVML object is a constructor argument: the `pynvml` module, or `simulator.fake_nvml.FakeNvml`.
Nothing happens at import or construction; `open()` (called by the first `read()`) runs `nvmlInit`.

Per GPU and scrape the source makes about ten NVML calls: one batched `nvmlDeviceGetFieldValues` (energy,
memory temperature, PCIe replays, ECC volatile totals, instant power, power limit, NVLink data TX/RX per
link), two `nvmlDeviceGetSamples`, memory, temperature, SM clock, clock-event reasons, PCIe generation and
width, and two GPM calls where GPM is supported. Static facts are read once per GPU (again after it was lost).

Rules:
- A value whose call or field returns NOT_SUPPORTED is omitted (None), never reported as 0, and is not
  counted as an error. Any other failure omits the value and is counted by (call, error).
- Utilization ratios average the NVML samples newer than the last one seen at the previous read. When no
  new sample arrived (NVML answers NOT_FOUND), the previous average is repeated while the last new sample
  was seen less than `MAX_STALE_SECONDS` ago, then omitted: scrapes closer together than NVML's sample
  period (1/6 s) do not blink, and a GPU whose samples stopped does not lie.
- GPM ratios (SM active, tensor active) are computed between this read's GPM sample and the previous one,
  so they are absent on the first read of a GPU.
- A GPU that raises GPU_IS_LOST, or whose handle cannot be obtained, gives `up=False` (with its last known
  static facts); the next read tries it again from the handle on.
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

# Union member of c_nvmlValue_t for each NVML_VALUE_TYPE_* (double, uint, ulong, ulonglong, slonglong, ...).
_VALUE_ATTRS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

# (snapshot attribute, NVML field constant name, scale to base units)
_SCALAR_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("energy_joules", "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),  # mJ
    ("memory_temperature_celsius", "NVML_FI_DEV_MEMORY_TEMP", 1),
    ("pcie_replay_errors", "NVML_FI_DEV_PCIE_REPLAY_COUNTER", 1),
    ("ecc_corrected_errors", "NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 1),
    ("ecc_uncorrected_errors", "NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 1),
    ("power_watts", "NVML_FI_DEV_POWER_INSTANT", 1e-3),  # mW, scope 0 = NVML_POWER_SCOPE_GPU
    ("power_limit_watts", "NVML_FI_DEV_POWER_CURRENT_LIMIT", 1e-3),  # mW
)
_NVLINK_TX = "nvlink_tx"
_NVLINK_RX = "nvlink_rx"
_KIB = 1024


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Static facts about a GPU, read once."""

    name: str
    uuid: str
    pci_bus_id: str
    driver_version: str
    vbios_version: str


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """One GPU at one read, in base units; None means unsupported or unreadable (omit it)."""

    index: int
    up: bool
    info: GpuInfo | None = None
    utilization_ratio: float | None = None
    memory_bandwidth_utilization_ratio: float | None = None
    sm_active_ratio: float | None = None
    tensor_active_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    temperature_celsius: float | None = None
    memory_temperature_celsius: float | None = None
    sm_clock_hertz: float | None = None
    pcie_link_generation: int | None = None
    pcie_link_width: int | None = None
    pcie_replay_errors: int | None = None
    ecc_corrected_errors: int | None = None
    ecc_uncorrected_errors: int | None = None
    throttle_reasons: tuple[tuple[str, bool], ...] = ()  # (reason, active) for each supported reason
    nvlink_transmitted_bytes: tuple[tuple[int, int], ...] = ()  # (link, bytes)
    nvlink_received_bytes: tuple[tuple[int, int], ...] = ()

    @property
    def uuid(self) -> str:
        """The GPU's UUID, or "" when it was never read."""
        return self.info.uuid if self.info is not None else ""


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
        self.name = self._candidates[0][0] if self._candidates else names[0]

    def __call__(self, *args: Any) -> Any:
        while True:
            if not self._candidates:
                raise AttributeError(f"NVML bindings lack {self.name}")
            try:
                return self._candidates[0][1](*args)
            except self._not_found:
                if len(self._candidates) == 1:
                    raise
                log.info("NVML driver lacks %s; using %s", self.name, self._candidates[1][0])
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
    """Averages the utilization samples of one kind newer than the last one seen."""

    __slots__ = ("last_average", "last_new_at", "last_timestamp")

    def __init__(self) -> None:
        self.last_timestamp = 0
        self.last_average: float | None = None
        self.last_new_at = 0.0  # the reader's clock when new samples last arrived

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
            return self.last_average
        return self.no_new_samples(now)

    def no_new_samples(self, now: float) -> float | None:
        """Repeat the previous average while it is recent, then give up."""
        return self.last_average if now - self.last_new_at <= MAX_STALE_SECONDS else None

    def reset(self) -> None:
        """Forget everything (the GPU was lost)."""
        self.last_timestamp = 0
        self.last_average = None
        self.last_new_at = 0.0


class _Gpm:
    """A GPU's two GPM sample buffers and its reusable metrics request (SM active, tensor active)."""

    METRICS = (
        ("sm_active_ratio", "NVML_GPM_METRIC_SM_UTIL"),
        ("tensor_active_ratio", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    )

    def __init__(self, nvml: Nvml, previous: Any, current: Any) -> None:
        self.previous = previous
        self.current = current
        self.have_previous = False
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self.METRICS)
        for i, (_, metric) in enumerate(self.METRICS):
            request.metrics[i].metricId = getattr(nvml, metric)
        self.request = request

    def swap(self) -> None:
        """The sample just taken becomes the previous one."""
        self.previous, self.current = self.current, self.previous
        self.have_previous = True


@dataclass
class _GpuState:
    """What the source remembers about one GPU between reads."""

    index: int
    handle: Any = None
    info: GpuInfo | None = None
    refresh_static: bool = True
    lost: bool = False
    field_ids: list[tuple[int, int]] = field(default_factory=list)
    field_keys: list[tuple[str, int, float]] = field(default_factory=list)  # (key, link, scale)
    reasons: tuple[tuple[str, int], ...] = THROTTLE_REASONS
    gpm: _Gpm | None = None
    utilization: _SampleWindow = field(default_factory=_SampleWindow)
    memory_bandwidth: _SampleWindow = field(default_factory=_SampleWindow)


class NvmlSource:
    """Reads every GPU through an NVML object; see the module docstring for the rules.

    Not thread-safe: one `read()` at a time (the registry guarantees that for its collector).
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

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def device_count(self) -> int:
        """GPUs found by `open()` (0 before)."""
        return len(self._gpus)

    def open(self) -> None:
        """nvmlInit and count the GPUs; raises SourceError when NVML is unavailable. Idempotent."""
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
        self._gpus = [_GpuState(i) for i in range(count)]
        self._opened = True
        log.info("NVML opened: %d GPUs, driver %s", count, self._driver_version)

    def close(self) -> None:
        """Free GPM buffers and nvmlShutdown. Safe to call twice."""
        if not self._opened:
            return
        for state in self._gpus:
            self._free_gpm(state)
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
        """One snapshot per GPU, in index order; raises SourceError only when NVML itself is unavailable."""
        self.open()
        return [self._read_gpu(state) for state in self._gpus]

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index` (None if unknown), e.g. for the job collector."""
        if 0 <= index < len(self._gpus):
            info = self._gpus[index].info
            return info.uuid if info is not None and info.uuid else None
        return None

    def _read_gpu(self, state: _GpuState) -> GpuSnapshot:
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
            snapshot = self._read_dynamic(state)
        except self._lost as exc:
            return self._mark_lost(state, exc)
        if state.lost:
            log.warning("GPU %d answers again", state.index)
            state.lost = False
        return snapshot

    def _mark_lost(self, state: _GpuState, exc: Exception) -> GpuSnapshot:
        if not state.lost:
            log.warning("GPU %d is lost or unreachable: %s (%s)", state.index, exc, type(exc).__name__)
        state.lost = True
        self._free_gpm(state)
        state.handle = None
        state.refresh_static = True
        state.utilization.reset()
        state.memory_bandwidth.reset()
        return GpuSnapshot(state.index, False, state.info)

    def _read_static(self, state: _GpuState) -> None:
        nvml, handle, i = self._nvml, state.handle, state.index
        uuid = self._try(i, "nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, handle)
        name = self._try(i, "nvmlDeviceGetName", nvml.nvmlDeviceGetName, handle)
        pci = self._try(i, "nvmlDeviceGetPciInfo", nvml.nvmlDeviceGetPciInfo, handle)
        vbios = self._try(i, "nvmlDeviceGetVbiosVersion", nvml.nvmlDeviceGetVbiosVersion, handle)
        bus_id = _text(pci.busId) if pci is not None else ""
        state.info = GpuInfo(_text(name), _text(uuid), bus_id, self._driver_version, _text(vbios))
        self._plan_fields(state, self._nvlink_count(state))
        state.reasons = self._read_supported_reasons(state)
        state.gpm = self._open_gpm(state)
        state.refresh_static = False

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

    def _plan_fields(self, state: _GpuState, links: int) -> None:
        nvml = self._nvml
        ids: list[tuple[int, int]] = []
        keys: list[tuple[str, int, float]] = []
        for key, constant, scale in _SCALAR_FIELDS:
            ids.append((getattr(nvml, constant), 0))
            keys.append((key, -1, scale))
        for key, constant in (
            (_NVLINK_TX, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX"),
            (_NVLINK_RX, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX"),
        ):
            for link in range(links):
                ids.append((getattr(nvml, constant), link))
                keys.append((key, link, _KIB))
        state.field_ids = ids
        state.field_keys = keys

    def _read_supported_reasons(self, state: _GpuState) -> tuple[tuple[str, int], ...]:
        mask = self._try(state.index, self._supported_reasons.name, self._supported_reasons, state.handle)
        if mask is None:
            return THROTTLE_REASONS
        return tuple((name, bit) for name, bit in THROTTLE_REASONS if mask & bit)

    def _open_gpm(self, state: _GpuState) -> _Gpm | None:
        if not self._has_gpm:
            return None
        nvml, i = self._nvml, state.index
        support = self._try(i, "nvmlGpmQueryDeviceSupport", nvml.nvmlGpmQueryDeviceSupport, state.handle)
        if support is None or not support.isSupportedDevice:
            return None
        previous = self._try(i, "nvmlGpmSampleAlloc", nvml.nvmlGpmSampleAlloc)
        current = self._try(i, "nvmlGpmSampleAlloc", nvml.nvmlGpmSampleAlloc)
        if previous is None or current is None:
            for sample in (previous, current):
                if sample is not None:
                    self._free_sample(sample)
            return None
        return _Gpm(nvml, previous, current)

    def _free_gpm(self, state: _GpuState) -> None:
        gpm, state.gpm = state.gpm, None
        if gpm is not None:
            self._free_sample(gpm.previous)
            self._free_sample(gpm.current)

    def _free_sample(self, sample: Any) -> None:
        try:
            self._nvml.nvmlGpmSampleFree(sample)
        except self._error as exc:
            log.debug("nvmlGpmSampleFree failed: %s", exc)

    def _read_dynamic(self, state: _GpuState) -> GpuSnapshot:
        nvml, handle, i = self._nvml, state.handle, state.index
        v: dict[str, Any] = {}
        self._read_fields(state, v)
        self._read_power_fallbacks(state, v)
        v["utilization_ratio"] = self._average(state, state.utilization, nvml.NVML_GPU_UTILIZATION_SAMPLES)
        v["memory_bandwidth_utilization_ratio"] = self._average(
            state, state.memory_bandwidth, nvml.NVML_MEMORY_UTILIZATION_SAMPLES
        )
        memory = self._try(i, "nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is not None:
            v["memory_used_bytes"] = int(memory.used)
            v["memory_total_bytes"] = int(memory.total)
        v["temperature_celsius"] = self._try(
            i, self._temperature.name, self._temperature, handle, nvml.NVML_TEMPERATURE_GPU
        )
        clock = self._try(
            i, "nvmlDeviceGetClockInfo", nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM
        )
        if clock is not None:
            v["sm_clock_hertz"] = clock * 1_000_000
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
        return GpuSnapshot(i, True, state.info, **v)

    def _read_fields(self, state: _GpuState, v: dict[str, Any]) -> None:
        values = self._try(
            state.index,
            "nvmlDeviceGetFieldValues",
            self._nvml.nvmlDeviceGetFieldValues,
            state.handle,
            state.field_ids,
        )
        if values is None:
            return
        tx: list[tuple[int, int]] = []
        rx: list[tuple[int, int]] = []
        for value, (key, link, scale) in zip(self._plain(values), state.field_keys, strict=True):
            if value.nvmlReturn != 0:
                self._field_failed(state.index, key, value.nvmlReturn)
                continue
            number = getattr(value.value, _VALUE_ATTRS[value.valueType]) * scale
            if key == _NVLINK_TX:
                tx.append((link, int(number)))
            elif key == _NVLINK_RX:
                rx.append((link, int(number)))
            else:
                v[key] = number
        v["nvlink_transmitted_bytes"] = tuple(tx)
        v["nvlink_received_bytes"] = tuple(rx)

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

    def _read_gpm(self, state: _GpuState, gpm: _Gpm, v: dict[str, Any]) -> None:
        nvml, i = self._nvml, state.index
        if self._try(i, "nvmlGpmSampleGet", nvml.nvmlGpmSampleGet, state.handle, gpm.current) is None:
            gpm.have_previous = False
            return
        if gpm.have_previous:
            request = gpm.request
            request.sample1 = gpm.previous
            request.sample2 = gpm.current
            if self._try(i, "nvmlGpmMetricsGet", nvml.nvmlGpmMetricsGet, request) is not None:
                for n, (key, _) in enumerate(_Gpm.METRICS):
                    metric = request.metrics[n]
                    if metric.nvmlReturn == 0:
                        v[key] = metric.value / 100.0
                    else:
                        self._field_failed(i, key, metric.nvmlReturn, call="nvmlGpmMetricsGet")
        gpm.swap()

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
