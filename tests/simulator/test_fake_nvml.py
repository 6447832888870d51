"""FakeNvml: pynvml's shapes and errors, a load model whose counters only go up, and faults on demand."""

from __future__ import annotations

import ctypes
import random
import threading
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from simulator.fake_nvml import H100_SXM, H200_SXM, SAMPLE_PERIOD_US, V100_SXM2, FakeNvml, ManualClock
from simulator.nvml_costs import H200_COSTS, CallCosts


@pytest.fixture
def nvml() -> Iterator[FakeNvml]:
    fake = FakeNvml(gpu_count=2)
    fake.nvmlInit()
    yield fake
    fake.release_hangs()


def _address(handle: Any) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value


def _field(nvml: FakeNvml, gpu: int, field_id: int, scope: int = 0) -> Any:
    return nvml.nvmlDeviceGetFieldValues(nvml.nvmlDeviceGetHandleByIndex(gpu), [(field_id, scope)])[0]


def test_calls_before_init_raise_uninitialized() -> None:
    fake = FakeNvml()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    assert fake.nvmlDeviceGetCount() == 8
    fake.nvmlShutdown()
    assert not fake.initialized


def test_constants_structs_and_errors_are_pynvml_s(nvml: FakeNvml) -> None:
    assert nvml.NVML_FI_DEV_MEMORY_TEMP == pynvml.NVML_FI_DEV_MEMORY_TEMP
    assert nvml.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert nvml.c_nvmlFieldValue_t is pynvml.c_nvmlFieldValue_t
    assert nvml.nvmlEventTypeXidCriticalError == pynvml.nvmlEventTypeXidCriticalError
    with pytest.raises(AttributeError):
        nvml.nvmlDeviceGetBAR1MemoryInfo  # noqa: B018  (a pynvml function the fake does not implement)


def test_answers_have_pynvml_s_shapes(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(handle, pynvml.c_nvmlDevice_t)
    assert isinstance(nvml.nvmlDeviceGetMemoryInfo(handle), pynvml.c_nvmlMemory_t)
    assert isinstance(nvml.nvmlDeviceGetPciInfo(handle), pynvml.nvmlPciInfo_t)
    assert nvml.nvmlDeviceGetPciInfo(handle).busId == "00000000:18:00.0"
    values = nvml.nvmlDeviceGetFieldValues(
        handle, [pynvml.NVML_FI_DEV_MEMORY_TEMP, (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 3)]
    )
    assert all(isinstance(v, pynvml.c_nvmlFieldValue_t) for v in values)
    assert values[1].scopeId == 3
    nvml.step(1.0)
    value_type, samples = nvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert value_type == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    assert samples and all(isinstance(s, pynvml.c_nvmlSample_t) for s in samples)
    assert isinstance(nvml.nvmlGpmQueryDeviceSupport(handle), pynvml.c_nvmlGpmSupport_t)
    sample = nvml.nvmlGpmSampleAlloc()
    assert isinstance(sample, pynvml.c_nvmlGpmSample_t)
    assert isinstance(nvml.nvmlEventSetCreate(), pynvml.c_nvmlEventSet_t)
    assert isinstance(nvml.nvmlDeviceGetUUID(handle), str)
    assert nvml.nvmlDeviceGetUUID(handle).startswith("GPU-")


def test_models_look_like_hopper() -> None:
    for model in (H100_SXM, H200_SXM):
        assert 80e9 <= model.memory_total_bytes <= 160e9
        assert model.power_limit_watts == 700
        assert model.nvlink_links == 18
        assert model.gpm_supported


def test_power_follows_load_and_energy_integrates_it(nvml: FakeNvml) -> None:
    busy, idle = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.set_load(0, utilization=1.0, tensor_active=1.0, memory_bandwidth=1.0)
    assert nvml.nvmlDeviceGetPowerUsage(busy) == 700_000
    assert nvml.nvmlDeviceGetPowerUsage(idle) == round(H200_SXM.idle_power_watts * 1000)
    before = nvml.nvmlDeviceGetTotalEnergyConsumption(busy)
    nvml.step(10.0)
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(busy) - before == pytest.approx(7_000_000, abs=2)


def test_temperature_follows_power(nvml: FakeNvml) -> None:
    nvml.set_load(0, utilization=1.0, tensor_active=1.0)
    nvml.step(120.0)
    hot = nvml.nvmlDeviceGetTemperature(nvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_TEMPERATURE_GPU)
    cool = nvml.nvmlDeviceGetTemperature(nvml.nvmlDeviceGetHandleByIndex(1), pynvml.NVML_TEMPERATURE_GPU)
    assert hot > cool + 20


def test_counters_only_go_up(nvml: FakeNvml) -> None:
    rng = random.Random(7)
    fields = [
        (pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0),
        (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0),
        (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 17),
        (pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 0),
        (pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER, 0),
    ]
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    previous = [0] * len(fields)
    for _ in range(50):
        nvml.set_load(0, utilization=rng.random(), nvlink_tx=rng.random(), nvlink_rx=rng.random())
        if rng.random() < 0.2:
            nvml.inject_ecc(0, corrected=1)
            nvml.inject_pcie_replays(0, 2)
        nvml.step(rng.uniform(0.0, 5.0))
        now = [v.value.ullVal or v.value.uiVal for v in nvml.nvmlDeviceGetFieldValues(handle, fields)]
        assert all(b >= a for a, b in zip(previous, now, strict=True))
        previous = now
    assert all(v > 0 for v in previous)


def test_samples_newer_than_a_timestamp_then_not_found(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.set_load(0, utilization=0.42)
    nvml.step(1.0)
    _, samples = nvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert len(samples) == 1_000_000 // SAMPLE_PERIOD_US
    assert {s.sampleValue.uiVal for s in samples} == {42}
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, samples[-1].timeStamp)


def test_field_and_call_errors_on_demand(nvml: FakeNvml) -> None:
    nvml.set_field_error(pynvml.NVML_FI_DEV_MEMORY_TEMP)
    assert _field(nvml, 0, pynvml.NVML_FI_DEV_MEMORY_TEMP).nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert _field(nvml, 0, pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION).nvmlReturn == pynvml.NVML_SUCCESS
    nvml.set_field_error(pynvml.NVML_FI_DEV_MEMORY_TEMP, None)
    assert _field(nvml, 0, pynvml.NVML_FI_DEV_MEMORY_TEMP).nvmlReturn == pynvml.NVML_SUCCESS
    nvml.set_call_error("nvmlDeviceGetClockInfo", pynvml.NVML_ERROR_UNKNOWN, gpu=1)
    with pytest.raises(pynvml.NVMLError_Unknown):
        nvml.nvmlDeviceGetClockInfo(nvml.nvmlDeviceGetHandleByIndex(1), pynvml.NVML_CLOCK_SM)
    assert nvml.nvmlDeviceGetClockInfo(nvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM) > 0


def test_nvlink_scope_beyond_the_links_is_invalid(nvml: FakeNvml) -> None:
    value = _field(nvml, 0, pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 18)
    assert value.nvmlReturn == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_xid_is_delivered_through_the_event_set(nvml: FakeNvml) -> None:
    event_set = nvml.nvmlEventSetCreate()
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
    nvml.inject_xid(0, 13)  # GPU 0 is not registered: not delivered
    nvml.inject_xid(1, 79)
    data = nvml.nvmlEventSetWait_v2(event_set, 0)
    assert isinstance(data, pynvml.c_nvmlEventData_t)
    assert (data.eventType, data.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 79)
    assert _address(data.device) == _address(handle)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait_v2(event_set, 0)
    nvml.nvmlEventSetFree(event_set)


def test_events_can_be_unsupported(nvml: FakeNvml) -> None:
    nvml.set_capabilities(0, events=False)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetSupportedEventTypes(nvml.nvmlDeviceGetHandleByIndex(0))


def test_lost_gpu_raises_until_restored(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.lose_gpu(0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetMemoryInfo(handle)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.lose_gpu(0, handle_error=pynvml.NVML_ERROR_NO_PERMISSION)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(1)).total > 0
    nvml.restore_gpu(0)
    assert (
        nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(0)).total == H200_SXM.memory_total_bytes
    )


def test_gpm_metrics_between_two_samples(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.set_load(0, utilization=0.9, sm_active=0.5, tensor_active=0.25)
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmSampleGet(handle, first)
    nvml.step(2.0)
    nvml.nvmlGpmSampleGet(handle, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 3
    request.sample1, request.sample2 = first, second
    ids = (
        pynvml.NVML_GPM_METRIC_SM_UTIL,
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
    )
    for i, metric_id in enumerate(ids):
        request.metrics[i].metricId = metric_id
    nvml.nvmlGpmMetricsGet(request)
    assert request.metrics[0].value == pytest.approx(50.0)
    assert request.metrics[1].value == pytest.approx(25.0)
    assert request.metrics[2].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    nvml.nvmlGpmSampleFree(first)
    nvml.nvmlGpmSampleFree(second)
    assert nvml.open_gpm_samples == 0


def test_gpm_can_be_unsupported(nvml: FakeNvml) -> None:
    nvml.set_capabilities(1, gpm=False)
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    assert not nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlGpmSampleGet(handle, nvml.nvmlGpmSampleAlloc())


def test_hang_blocks_the_call_until_released(nvml: FakeNvml) -> None:
    nvml.hang("nvmlDeviceGetCount")
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(nvml.nvmlDeviceGetCount()), daemon=True)
    worker.start()
    assert nvml.wait_blocked()
    assert worker.is_alive() and not result
    assert nvml.nvmlDeviceGetHandleByIndex(0) is not None  # other calls still answer
    nvml.release_hangs()
    worker.join(10)
    assert result == [2]
    assert nvml.nvmlDeviceGetCount() == 2  # the hang was for one call only


def test_thermal_throttle_sets_reasons_and_slows_the_clock(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.set_load(0, utilization=0.5)
    normal = nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
    nvml.set_thermal_throttle(0, True)
    reasons = nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    assert reasons & pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert reasons & pynvml.nvmlClocksEventReasonSwThermalSlowdown
    assert nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) < normal
    idle = nvml.nvmlDeviceGetCurrentClocksEventReasons(nvml.nvmlDeviceGetHandleByIndex(1))
    assert idle == pynvml.nvmlClocksEventReasonGpuIdle


def test_full_load_hits_the_power_cap(nvml: FakeNvml) -> None:
    nvml.set_load(0, utilization=1.0, tensor_active=1.0, memory_bandwidth=1.0)
    reasons = nvml.nvmlDeviceGetCurrentClocksEventReasons(nvml.nvmlDeviceGetHandleByIndex(0))
    assert reasons & pynvml.nvmlClocksEventReasonSwPowerCap


def test_init_failure_on_demand() -> None:
    fake = FakeNvml()
    fake.fail_init(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        fake.nvmlInit()
    fake.fail_init(None)
    fake.nvmlInit()
    assert fake.initialized


def test_external_clock_drives_the_state() -> None:
    now = [100.0]
    fake = FakeNvml(gpu_count=1, clock=lambda: now[0])
    fake.nvmlInit()
    fake.set_load(0, utilization=1.0, tensor_active=1.0, memory_bandwidth=1.0)
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    start = fake.nvmlDeviceGetTotalEnergyConsumption(handle)
    now[0] += 2.0
    assert fake.nvmlDeviceGetTotalEnergyConsumption(handle) - start == pytest.approx(1_400_000, abs=2)
    with pytest.raises(TypeError):
        fake.step(1.0)


def test_manual_clock_only_moves_forward() -> None:
    clock = ManualClock(5.0)
    clock.advance(1.5)
    assert clock() == 6.5
    with pytest.raises(ValueError):
        clock.advance(-1.0)


def test_memory_v1_counts_the_reserve_v2_reports_it_apart(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.set_load(0, memory_used_bytes=4 << 30)
    v1 = nvml.nvmlDeviceGetMemoryInfo(handle)
    v2 = nvml.nvmlDeviceGetMemoryInfo(handle, pynvml.nvmlMemory_v2)
    assert isinstance(v2, pynvml.c_nvmlMemory_v2_t) and v2.version == pynvml.nvmlMemory_v2
    assert v2.used == 4 << 30 and v2.reserved == H200_SXM.memory_reserved_bytes
    assert v1.used == v2.used + v2.reserved and v1.free == v2.free
    assert v2.total == v2.used + v2.reserved + v2.free == H200_SXM.memory_total_bytes
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nvml.nvmlDeviceGetMemoryInfo(handle, 0x01000028)
    nvml.set_capabilities(0, memory_v2=False)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetMemoryInfo(handle, pynvml.nvmlMemory_v2)


def test_row_remapping_or_page_retirement_by_model() -> None:
    hopper, volta = FakeNvml(gpu_count=1), FakeNvml(gpu_count=1, model=V100_SXM2)
    for fake in (hopper, volta):
        fake.nvmlInit()
    hopper.inject_row_remap(0, correctable=2, uncorrectable=1)
    handle = hopper.nvmlDeviceGetHandleByIndex(0)
    assert hopper.nvmlDeviceGetRemappedRows(handle) == (2, 1, 1, 0)  # the uncorrectable one waits for a reset
    assert _field(hopper, 0, pynvml.NVML_FI_DEV_REMAPPED_UNC).value.uiVal == 1
    assert _field(hopper, 0, pynvml.NVML_FI_DEV_RETIRED_DBE).nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    volta.inject_retired_pages(0, double_bit=3)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        volta.nvmlDeviceGetRemappedRows(volta.nvmlDeviceGetHandleByIndex(0))
    assert _field(volta, 0, pynvml.NVML_FI_DEV_RETIRED_DBE).value.ullVal == 3
    assert _field(volta, 0, pynvml.NVML_FI_DEV_REMAPPED_COR).nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_nvlink_errors_per_link_through_scoped_fields(nvml: FakeNvml) -> None:
    nvml.inject_nvlink_errors(1, link=3, crc=5, replay=1)
    assert _field(nvml, 1, pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 3).value.ullVal == 5
    assert _field(nvml, 1, pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, 3).value.ullVal == 1
    assert _field(nvml, 1, pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 2).value.ullVal == 0
    assert _field(nvml, 1, pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 18).nvmlReturn == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )
    with pytest.raises(ValueError):
        nvml.inject_nvlink_errors(1, link=18, crc=1)


def test_violation_time_and_pcie_throughput_follow_the_state(nvml: FakeNvml) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.step(10.0)  # idle: clocks held by low utilization
    low = nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_LOW_UTILIZATION)
    assert isinstance(low, pynvml.c_nvmlViolationTime_t) and low.violationTime == 10 * 10**9
    assert nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_THERMAL).violationTime == 0
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetViolationStatus(handle, pynvml.NVML_PERF_POLICY_TOTAL_BASE_CLOCKS)
    assert nvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_TX_BYTES) == 0
    nvml.set_load(0, utilization=0.5)
    assert nvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES) == round(2e9 / 1024)
    assert nvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM) == H200_SXM.memory_clock_mhz


def test_mig_devices_have_their_own_handles_ids_memory_and_activity(nvml: FakeNvml) -> None:
    parent = nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetMigMode(parent) == [0, 0]
    with pytest.raises(ValueError):
        nvml.enable_mig(1, ("9g.999gb",))
    nvml.enable_mig(1, ("3g.71gb", "1g.18gb"))
    assert nvml.nvmlDeviceGetMigMode(parent) == [1, 1]
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(parent) == 7
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 2)
    assert nvml.nvmlDeviceIsMigDeviceHandle(mig) == 1 and nvml.nvmlDeviceIsMigDeviceHandle(parent) == 0
    assert (nvml.nvmlDeviceGetGpuInstanceId(mig), nvml.nvmlDeviceGetComputeInstanceId(mig)) == (2, 0)
    assert nvml.nvmlDeviceGetName(mig) == "NVIDIA H200 MIG 1g.18gb"
    assert nvml.nvmlDeviceGetUUID(mig).startswith("MIG-")
    nvml.set_mig_load(1, 1, utilization=0.4, memory_used_bytes=3 << 30)
    assert nvml.nvmlDeviceGetMemoryInfo(mig).used == 3 << 30
    assert nvml.nvmlDeviceGetMemoryInfo(mig).total == 18 * 10**9
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetSamples(parent, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmMigSampleGet(parent, 2, first)
    nvml.step(4.0)
    nvml.nvmlGpmMigSampleGet(parent, 2, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
    request.sample1, request.sample2 = first, second
    nvml.nvmlGpmMetricsGet(request)
    assert request.metrics[0].value == pytest.approx(40.0)
    nvml.nvmlGpmSampleGet(parent, second)  # a whole-GPU sample cannot be compared with an instance's
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmMetricsGet(request)
    nvml.disable_mig(1)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetGpuInstanceId(mig)


def test_a_stalled_gpu_blocks_its_own_calls_only(nvml: FakeNvml) -> None:
    stalled, free = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.stall_gpu(0)
    done = threading.Event()

    def call() -> None:
        nvml.nvmlDeviceGetPowerUsage(stalled)
        done.set()

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    assert nvml.wait_blocked()
    assert nvml.nvmlDeviceGetPowerUsage(free) > 0  # the other GPU answers meanwhile
    assert not done.is_set()
    nvml.release_hangs()
    thread.join(5)
    assert done.is_set() and nvml.blocked == 0
    nvml.stall_gpu(0, seconds=0.0)  # a stall that already ended blocks nothing
    assert nvml.nvmlDeviceGetPowerUsage(stalled) > 0
    with pytest.raises(IndexError):
        nvml.stall_gpu(9)


def test_costs_are_charged_per_call_and_per_field() -> None:
    costs = CallCosts(
        calls={"nvmlDeviceGetSamples": 0.003},
        fields={pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: 0.002},
        default_call=0.0001,
        default_field=0.00005,
    )
    fake = FakeNvml(gpu_count=2, costs=costs)
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(1)
    assert fake.paid_seconds == 0  # library calls (init, handles) are free
    fake.step(1.0)
    fake.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    fake.nvmlDeviceGetFieldValues(
        handle, [pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, pynvml.NVML_FI_DEV_MEMORY_TEMP]
    )
    fake.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    assert fake.paid_seconds == pytest.approx(0.003 + 0.002 + 0.00005 + 0.0001)
    fake.set_costs(None)
    fake.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert fake.paid_seconds == 0


def test_h200_costs_are_the_measured_ones() -> None:
    # docs/nvml-h200.md: two utilization sample calls 2.75 ms each; the 7 scalar fields 3.5-4.8 ms
    assert H200_COSTS.call("nvmlDeviceGetSamples") == pytest.approx(2.75e-3)
    seven = [
        pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        pynvml.NVML_FI_DEV_MEMORY_TEMP,
        pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER,
        pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_POWER_INSTANT,
        pynvml.NVML_FI_DEV_POWER_CURRENT_LIMIT,
    ]
    assert 3.5e-3 <= H200_COSTS.field_values(seven) <= 4.8e-3
    assert H200_COSTS.call("nvmlDeviceGetPcieThroughput") == pytest.approx(21e-3)
