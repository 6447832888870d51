"""NvmlSource and XidWatcher against the fake NVML: base units, batching, omissions, averaging, faults."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from exporter.errors import SourceError
from exporter.sources import xid_events
from exporter.sources.nvml_source import MAX_STALE_SECONDS, THROTTLE_REASONS, GpuSnapshot, NvmlSource
from exporter.sources.xid_events import XidWatcher
from simulator.fake_nvml import H200_SXM, FakeNvml, ManualClock
from tests.helpers import wait_for

GPUS = 4


@pytest.fixture
def fake() -> FakeNvml:
    nvml = FakeNvml(gpu_count=GPUS)
    for i in range(GPUS):
        nvml.set_load(
            i,
            utilization=0.25 * i,
            memory_bandwidth=0.1 * i,
            sm_active=0.2 * i,
            tensor_active=0.1 * i,
            memory_used_bytes=i << 34,
            nvlink_tx=0.1 * i,
            nvlink_rx=0.05 * i,
        )
    nvml.step(30.0)
    return nvml


@pytest.fixture
def source(fake: FakeNvml) -> Iterator[NvmlSource]:
    src = NvmlSource(fake)
    yield src
    src.close()


def _two_reads(fake: FakeNvml, source: NvmlSource, seconds: float = 15.0) -> list[GpuSnapshot]:
    source.read()
    fake.step(seconds)
    return source.read()


def test_snapshot_in_base_units(fake: FakeNvml, source: NvmlSource) -> None:
    snap = _two_reads(fake, source)[2]
    gpu = fake.gpu(2)
    assert snap.up
    assert snap.info is not None
    assert snap.info.name == "NVIDIA H200"
    assert snap.info.uuid == gpu.uuid
    assert snap.info.pci_bus_id == gpu.pci_bus_id
    assert snap.info.driver_version == fake.driver_version
    assert snap.info.vbios_version == H200_SXM.vbios_version
    assert snap.memory_total_bytes == H200_SXM.memory_total_bytes
    assert snap.memory_used_bytes == 2 << 34
    assert snap.power_watts == pytest.approx(gpu.power_watts(), abs=0.001)
    assert snap.power_limit_watts == 700.0
    assert snap.energy_joules == pytest.approx(gpu.energy_mj / 1000, abs=0.002)
    assert snap.temperature_celsius == round(gpu.temperature)
    assert snap.memory_temperature_celsius == round(gpu.memory_temperature())
    assert snap.sm_clock_hertz == 1980e6
    assert (snap.pcie_link_generation, snap.pcie_link_width) == (5, 16)
    assert (snap.pcie_replay_errors, snap.ecc_corrected_errors, snap.ecc_uncorrected_errors) == (0, 0, 0)
    assert snap.utilization_ratio == pytest.approx(0.5)
    assert snap.memory_bandwidth_utilization_ratio == pytest.approx(0.2)
    assert snap.sm_active_ratio == pytest.approx(0.4)
    assert snap.tensor_active_ratio == pytest.approx(0.2)
    assert [link for link, _ in snap.nvlink_transmitted_bytes] == list(range(18))
    tx = dict(snap.nvlink_transmitted_bytes)
    rx = dict(snap.nvlink_received_bytes)
    assert tx[5] == int(gpu.nvlink_tx_bytes[5] // 1024) * 1024  # NVML counts KiB
    assert rx[5] == int(gpu.nvlink_rx_bytes[5] // 1024) * 1024
    assert tx[5] > rx[5] > 0


def test_one_batched_field_call_per_gpu_per_read(fake: FakeNvml, source: NvmlSource) -> None:
    source.read()
    before = fake.calls.copy()
    fake.step(15.0)
    source.read()
    made = fake.calls - before
    assert made["nvmlDeviceGetFieldValues"] == GPUS
    assert made["nvmlDeviceGetPowerUsage"] == 0  # the field answered: no fallback call
    assert sum(made.values()) <= 12 * GPUS


def test_not_supported_fields_are_omitted_not_zero(fake: FakeNvml, source: NvmlSource) -> None:
    for field in (
        pynvml.NVML_FI_DEV_MEMORY_TEMP,
        pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
    ):
        fake.set_field_error(field, gpu=1)
    snaps = _two_reads(fake, source)
    assert snaps[1].memory_temperature_celsius is None
    assert snaps[1].ecc_corrected_errors is None and snaps[1].ecc_uncorrected_errors is None
    assert snaps[1].nvlink_transmitted_bytes == ()
    assert len(snaps[1].nvlink_received_bytes) == 18
    assert snaps[0].memory_temperature_celsius is not None and snaps[0].ecc_corrected_errors == 0
    assert source.errors.snapshot() == {}  # unsupported is a capability, not a failure


def test_other_field_errors_are_counted_and_logged(
    fake: FakeNvml, source: NvmlSource, caplog: pytest.LogCaptureFixture
) -> None:
    fake.set_field_error(pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER, pynvml.NVML_ERROR_UNKNOWN, gpu=1)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.nvml_source"):
        snaps = _two_reads(fake, source)
    assert snaps[1].pcie_replay_errors is None
    assert snaps[0].pcie_replay_errors == 0
    assert source.errors.snapshot() == {("nvmlDeviceGetFieldValues:pcie_replay_errors", "Unknown"): 2}
    assert any("pcie_replay_errors" in r.getMessage() for r in caplog.records)


def test_call_errors_are_counted_by_call_and_error(fake: FakeNvml, source: NvmlSource) -> None:
    fake.set_call_error("nvmlDeviceGetClockInfo", pynvml.NVML_ERROR_TIMEOUT, gpu=0)
    snaps = source.read()
    assert snaps[0].up and snaps[0].sm_clock_hertz is None and snaps[0].power_watts is not None
    assert source.errors.snapshot() == {("nvmlDeviceGetClockInfo", "Timeout"): 1}


def test_power_falls_back_to_the_older_calls(fake: FakeNvml, source: NvmlSource) -> None:
    fake.set_field_error(pynvml.NVML_FI_DEV_POWER_INSTANT)
    fake.set_field_error(pynvml.NVML_FI_DEV_POWER_CURRENT_LIMIT)
    snap = source.read()[3]
    assert snap.power_watts == pytest.approx(fake.gpu(3).power_watts(), abs=0.001)
    assert snap.power_limit_watts == 700.0
    fake.set_call_error("nvmlDeviceGetPowerUsage")
    assert source.read()[3].power_watts is None
    assert source.errors.snapshot() == {}


def test_temperature_falls_back_when_the_driver_lacks_the_new_call(
    fake: FakeNvml, source: NvmlSource
) -> None:
    fake.set_call_error("nvmlDeviceGetTemperatureV", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    assert source.read()[1].temperature_celsius == round(fake.gpu(1).temperature)
    assert source.read()[1].temperature_celsius is not None
    assert fake.calls["nvmlDeviceGetTemperatureV"] == 1  # switched once, for good
    assert source.errors.snapshot() == {}


def test_utilization_is_the_average_since_the_last_read(fake: FakeNvml, source: NvmlSource) -> None:
    source.read()
    fake.set_load(0, utilization=0.2, memory_bandwidth=0.9)
    fake.step(5.0)
    fake.set_load(0, utilization=0.8, memory_bandwidth=0.1)
    fake.step(5.0)
    snap = source.read()[0]
    assert snap.utilization_ratio == pytest.approx(0.5, abs=0.02)  # not the instant 0.8
    assert snap.memory_bandwidth_utilization_ratio == pytest.approx(0.5, abs=0.02)
    fake.step(3.0)
    assert source.read()[0].utilization_ratio == pytest.approx(0.8)  # only the samples since then


def test_no_new_samples_repeat_the_last_average_then_omit(fake: FakeNvml) -> None:
    reader_clock = ManualClock()
    source = NvmlSource(fake, clock=reader_clock)
    first = source.read()[3].utilization_ratio
    assert first == pytest.approx(0.75)
    for _ in range(5):  # scrapes faster than NVML samples: the last average, not a gap
        assert source.read()[3].utilization_ratio == first
    reader_clock.advance(MAX_STALE_SECONDS + 1)  # samples stopped coming: omit, do not lie
    assert source.read()[3].utilization_ratio is None
    fake.step(1.0)
    assert source.read()[3].utilization_ratio == pytest.approx(0.75)
    source.close()


def test_gpm_ratios_need_two_reads(fake: FakeNvml, source: NvmlSource) -> None:
    assert source.read()[1].sm_active_ratio is None
    fake.step(2.0)
    snap = source.read()[1]
    assert snap.sm_active_ratio == pytest.approx(0.2)
    assert snap.tensor_active_ratio == pytest.approx(0.1)


def test_gpm_unsupported_is_omitted_without_errors(fake: FakeNvml, source: NvmlSource) -> None:
    fake.set_capabilities(2, gpm=False)
    snap = _two_reads(fake, source)[2]
    assert snap.sm_active_ratio is None and snap.tensor_active_ratio is None
    assert fake.calls["nvmlGpmSampleGet"] == 2 * (GPUS - 1)
    assert source.errors.snapshot() == {}


def test_throttle_reasons_are_named(fake: FakeNvml, source: NvmlSource) -> None:
    fake.set_thermal_throttle(1, True)
    snaps = source.read()
    hot, idle = dict(snaps[1].throttle_reasons), dict(snaps[0].throttle_reasons)
    assert list(hot) == [name for name, _ in THROTTLE_REASONS]
    assert hot["hw_thermal_slowdown"] and hot["sw_thermal_slowdown"] and not hot["gpu_idle"]
    assert idle["gpu_idle"] and not idle["hw_thermal_slowdown"]


def test_throttle_bits_are_nvml_s() -> None:
    names = {
        "gpu_idle": "GpuIdle",
        "applications_clocks_setting": "ApplicationsClocksSetting",
        "sw_power_cap": "SwPowerCap",
        "hw_slowdown": "HwSlowdown",
        "sync_boost": "SyncBoost",
        "sw_thermal_slowdown": "SwThermalSlowdown",
        "hw_thermal_slowdown": "HwThermalSlowdown",
        "hw_power_brake_slowdown": "HwPowerBrakeSlowdown",
        "display_clock_setting": "DisplayClockSetting",
    }
    for name, bit in THROTTLE_REASONS:
        assert bit == getattr(pynvml, f"nvmlClocksEventReason{names[name]}")


def test_a_lost_gpu_is_down_and_the_others_still_report(fake: FakeNvml, source: NvmlSource) -> None:
    source.read()
    uuid = fake.gpu(2).uuid
    gpm_before = fake.open_gpm_samples
    fake.lose_gpu(2)
    snaps = source.read()
    assert [s.up for s in snaps] == [True, True, False, True]
    assert snaps[2].uuid == uuid and snaps[2].power_watts is None
    assert snaps[3].power_watts is not None
    assert fake.open_gpm_samples == gpm_before - 2
    assert source.errors.snapshot() == {}  # lost is reported as up=0, not as an error
    assert not source.read()[2].up
    fake.restore_gpu(2)
    uuid_reads = fake.calls["nvmlDeviceGetUUID"]
    assert source.read()[2].up
    assert fake.calls["nvmlDeviceGetUUID"] == uuid_reads + 1  # static facts read again


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_NO_PERMISSION])
def test_a_handle_that_cannot_be_had_means_down(fake: FakeNvml, source: NvmlSource, code: int) -> None:
    fake.lose_gpu(1, handle_error=code)
    snaps = source.read()
    assert not snaps[1].up and snaps[1].info is None and snaps[1].uuid == ""
    assert all(s.up for i, s in enumerate(snaps) if i != 1)
    error = "Unknown" if code == pynvml.NVML_ERROR_UNKNOWN else "NoPermission"
    assert source.errors.snapshot() == {("nvmlDeviceGetHandleByIndex", error): 1}
    fake.restore_gpu(1)
    assert source.read()[1].up


def test_nvml_init_failure_raises_source_error_then_recovers(fake: FakeNvml) -> None:
    fake.fail_init(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    source = NvmlSource(fake)
    with pytest.raises(SourceError, match="Driver Not Loaded"):
        source.read()
    fake.fail_init(None)
    assert len(source.read()) == GPUS
    source.close()


def test_construction_touches_nothing(fake: FakeNvml) -> None:
    NvmlSource(fake)
    XidWatcher(fake)
    assert sum(fake.calls.values()) == 0


def test_close_shuts_nvml_down_and_frees_gpm(fake: FakeNvml, source: NvmlSource) -> None:
    _two_reads(fake, source)
    assert fake.open_gpm_samples == 2 * GPUS
    source.close()
    source.close()
    assert not fake.initialized
    assert fake.open_gpm_samples == 0


def test_uuid_of(fake: FakeNvml, source: NvmlSource) -> None:
    assert source.uuid_of(0) is None
    source.read()
    assert source.uuid_of(0) == fake.gpu(0).uuid
    assert source.uuid_of(99) is None


# --- XID watcher --------------------------------------------------------------------------------


@pytest.fixture
def watcher(fake: FakeNvml) -> Iterator[XidWatcher]:
    xid = XidWatcher(fake, timeout_ms=20)
    yield xid
    xid.stop()


def test_xid_events_are_counted_per_gpu_and_xid(fake: FakeNvml, watcher: XidWatcher) -> None:
    watcher.start()
    assert watcher.is_alive() and watcher.health_problem() is None
    assert watcher.registered_gpus == tuple(range(GPUS))
    fake.inject_xid(1, 79)
    fake.inject_xid(1, 79)
    fake.inject_xid(3, 48)
    expected = {(1, 79): 2, (3, 48): 1}
    assert wait_for(lambda: watcher.counts() == expected)
    watcher.stop()
    assert not watcher.is_alive()
    assert not fake.initialized  # event set freed, NVML reference dropped
    assert watcher.counts() == expected


def test_gpus_without_events_are_skipped(fake: FakeNvml, watcher: XidWatcher) -> None:
    fake.set_capabilities(2, events=False)
    watcher.start()
    assert watcher.registered_gpus == (0, 1, 3)
    fake.inject_xid(2, 31)
    fake.inject_xid(0, 31)
    assert wait_for(lambda: watcher.counts() == {(0, 31): 1})
    assert watcher.errors.snapshot() == {}


def test_xid_watcher_without_a_driver(fake: FakeNvml, watcher: XidWatcher) -> None:
    fake.fail_init()
    with pytest.raises(SourceError):
        watcher.start()
    assert watcher.ensure_started() is False
    assert not watcher.is_alive() and watcher.health_problem() is None
    fake.fail_init(None)
    assert watcher.ensure_started() is True


def test_wait_errors_are_counted_and_the_thread_goes_on(
    fake: FakeNvml, watcher: XidWatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(xid_events, "ERROR_BACKOFF_SECONDS", 0.001)
    real_wait = fake.nvmlEventSetWait_v2
    failures = [pynvml.NVML_ERROR_UNKNOWN]

    def flaky_wait(event_set: Any, timeout_ms: int) -> Any:
        if failures:
            raise pynvml.NVMLError(failures.pop())
        return real_wait(event_set, timeout_ms)

    monkeypatch.setattr(fake, "nvmlEventSetWait_v2", flaky_wait)
    watcher.start()
    fake.inject_xid(0, 94)
    assert wait_for(lambda: watcher.counts() == {(0, 94): 1})
    assert watcher.errors.snapshot() == {("nvmlEventSetWait_v2", "Unknown"): 1}
    assert watcher.is_alive()
