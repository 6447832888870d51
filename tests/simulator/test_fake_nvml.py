"""FakeNvml: pynvml's shapes and errors, a load model whose counters only go up, and faults on demand."""

from __future__ import annotations

import ctypes
import random
import threading
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from simulator.fake_nvml import H100_SXM, H200_SXM, SAMPLE_PERIOD_US, FakeNvml, ManualClock


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
