"""NvmlSource and XidWatcher against the fake NVML: base units, batching, omissions, averaging, faults."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from exporter.errors import SourceError
from exporter.sources import xid_events
from exporter.sources.gpu_snapshot import GpuSnapshot
from exporter.sources.nvml_source import (
    MAX_STALE_SECONDS,
    THROTTLE_REASONS,
    VIOLATION_POLICIES,
    NvmlSource,
)
from exporter.sources.xid_events import XidWatcher
from simulator.fake_nvml import H200_SXM, V100_SXM2, FakeNvml, ManualClock
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
    # a slow read: a dozen cheap calls, six violation policies, PCIe throughput both ways, MIG mode
    assert sum(made.values()) <= 21 * GPUS


def test_fast_reads_leave_the_costly_values_to_slow_reads(fake: FakeNvml, source: NvmlSource) -> None:
    first = source.read_gpu(1)  # the first read of a GPU is always slow
    fake.step(15.0)
    before = fake.calls.copy()
    fast = source.read_gpu(1, slow=False)
    made = fake.calls - before
    assert made["nvmlDeviceGetFieldValues"] == 1
    assert made["nvmlDeviceGetViolationStatus"] == made["nvmlDeviceGetPcieThroughput"] == 0
    assert fast.energy_joules == first.energy_joules  # the last slow value, repeated
    assert fast.power_watts is not None and fast.memory_used_bytes is not None
    slow = source.read_gpu(1, slow=True)
    assert slow.energy_joules == pytest.approx(fake.gpu(1).energy_mj / 1000, abs=0.002)
    assert slow.energy_joules is not None and first.energy_joules is not None
    assert slow.energy_joules > first.energy_joules


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
    assert snaps[0].memory_clock_hertz is None and snaps[1].memory_clock_hertz == 3201e6
    assert source.errors.snapshot() == {("nvmlDeviceGetClockInfo", "Timeout"): 2}  # SM and memory clock


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


# --- what dcgm-exporter users expect ------------------------------------------------------------------


def test_memory_used_is_nvidia_smi_s_and_the_reserve_is_apart(fake: FakeNvml, source: NvmlSource) -> None:
    snap = source.read()[2]
    assert snap.memory_info_version == 2
    assert snap.memory_used_bytes == 2 << 34  # what the processes use: the reserve is not in it
    assert snap.memory_reserved_bytes == H200_SXM.memory_reserved_bytes
    assert snap.memory_total_bytes == H200_SXM.memory_total_bytes
    idle = source.read()[0]
    assert idle.memory_used_bytes == 0  # an idle H200 shows 0 MiB used in nvidia-smi


def test_memory_falls_back_to_v1_for_good_and_says_so(fake: FakeNvml, source: NvmlSource) -> None:
    fake.set_capabilities(2, memory_v2=False)
    snap = source.read()[2]
    assert snap.memory_info_version == 1
    assert snap.memory_used_bytes == (2 << 34) + H200_SXM.memory_reserved_bytes  # v1 counts the reserve
    assert snap.memory_reserved_bytes is None
    calls = fake.calls["nvmlDeviceGetMemoryInfo"]
    assert source.read()[2].memory_info_version == 1
    assert fake.calls["nvmlDeviceGetMemoryInfo"] == calls + GPUS  # one call each: v2 is not tried again
    assert source.read()[1].memory_info_version == 2
    assert source.errors.snapshot() == {}


def test_remapped_rows(fake: FakeNvml, source: NvmlSource) -> None:
    fake.inject_row_remap(1, correctable=3)
    fake.inject_row_remap(3, uncorrectable=1, failure=True)
    snaps = source.read()
    assert (snaps[1].remapped_rows_correctable, snaps[1].remapped_rows_uncorrectable) == (3, 0)
    assert (snaps[1].row_remap_pending, snaps[1].row_remap_failure) == (0, 0)
    assert (snaps[3].remapped_rows_uncorrectable, snaps[3].row_remap_pending, snaps[3].row_remap_failure) == (
        1,
        1,
        1,
    )
    assert snaps[1].retired_pages_single_bit is None  # remapping GPUs do not retire pages
    assert source.errors.snapshot() == {}


def test_retired_pages_where_rows_are_not_remapped() -> None:
    fake = FakeNvml(gpu_count=2, model=V100_SXM2)
    fake.inject_retired_pages(1, single_bit=2, double_bit=1, pending=True)
    source = NvmlSource(fake)
    try:
        snap = source.read()[1]
        assert (snap.retired_pages_single_bit, snap.retired_pages_double_bit, snap.retired_pages_pending) == (
            2,
            1,
            1,
        )
        assert snap.remapped_rows_correctable is None and snap.row_remap_failure is None
        assert snap.mig_enabled is None  # a V100 has no MIG
        assert source.errors.snapshot() == {}
    finally:
        source.close()


def test_nvlink_errors_per_link(fake: FakeNvml, source: NvmlSource) -> None:
    fake.inject_nvlink_errors(0, link=4, crc=7, replay=2)
    fake.inject_nvlink_errors(0, link=17, recovery=1)
    errors = {(link, kind): n for link, kind, n in source.read()[0].nvlink_errors}
    assert len(errors) == 18 * 3
    assert errors[(4, "crc")] == 7 and errors[(4, "replay")] == 2 and errors[(17, "recovery")] == 1
    assert sum(errors.values()) == 10


def test_clock_event_violation_time_in_seconds(fake: FakeNvml, source: NvmlSource) -> None:
    source.read()
    fake.set_load(0, utilization=0.0)
    fake.set_load(1, utilization=1.0, tensor_active=1.0, memory_bandwidth=1.0)  # at the power cap
    fake.set_thermal_throttle(2, True)
    before = {s.index: dict(s.clock_event_violation_seconds) for s in source.read()}
    fake.step(20.0)
    after = {s.index: dict(s.clock_event_violation_seconds) for s in source.read()}
    assert set(after[0]) == {name for name, _ in VIOLATION_POLICIES}
    assert after[0]["low_utilization"] - before[0]["low_utilization"] == pytest.approx(20.0)
    assert after[1]["power"] - before[1]["power"] == pytest.approx(20.0)
    assert after[2]["thermal"] - before[2]["thermal"] == pytest.approx(20.0)
    assert after[1]["low_utilization"] == before[1]["low_utilization"]
    assert after[0]["sync_boost"] == 0


def test_unsupported_policies_and_pcie_throughput_are_not_asked_again(
    fake: FakeNvml, source: NvmlSource
) -> None:
    fake.set_call_error("nvmlDeviceGetViolationStatus")  # NOT_SUPPORTED
    fake.set_call_error("nvmlDeviceGetPcieThroughput")
    snap = source.read()[0]
    assert snap.clock_event_violation_seconds == () and snap.pcie_transmit_bytes_per_second is None
    calls = fake.calls.copy()
    source.read()
    made = fake.calls - calls
    assert made["nvmlDeviceGetViolationStatus"] == made["nvmlDeviceGetPcieThroughput"] == 0
    assert source.errors.snapshot() == {}


def test_pcie_throughput_and_memory_clock(fake: FakeNvml, source: NvmlSource) -> None:
    snap = source.read()[3]
    assert snap.memory_clock_hertz == H200_SXM.memory_clock_mhz * 1e6
    kib = fake.gpu(3).pcie_kib_per_second(pynvml.NVML_PCIE_UTIL_TX_BYTES)
    assert snap.pcie_transmit_bytes_per_second == kib * 1024 > 0
    assert (
        snap.pcie_receive_bytes_per_second
        == fake.gpu(3).pcie_kib_per_second(pynvml.NVML_PCIE_UTIL_RX_BYTES) * 1024
    )
    assert source.read()[0].pcie_transmit_bytes_per_second == 0  # idle


def test_mig_instances_with_their_own_activity_and_memory(fake: FakeNvml, source: NvmlSource) -> None:
    fake.enable_mig(2, ("3g.71gb", "2g.35gb"))
    fake.set_mig_load(2, 0, utilization=0.6, memory_used_bytes=20 << 30)
    fake.set_mig_load(2, 1, utilization=0.2, memory_used_bytes=1 << 30)
    first = source.read()[2]
    assert first.mig_enabled is True and source.read()[1].mig_enabled is False
    assert [(m.gpu_instance, m.compute_instance, m.profile) for m in first.mig_instances] == [
        (1, 0, "3g.71gb"),
        (2, 0, "2g.35gb"),
    ]
    assert all(m.uuid.startswith("MIG-") for m in first.mig_instances)
    assert first.mig_instances[0].utilization_ratio is None  # GPM needs two samples
    fake.step(10.0)
    snap = source.read()[2]
    big, small = snap.mig_instances
    assert big.utilization_ratio == pytest.approx(0.6) and small.utilization_ratio == pytest.approx(0.2)
    assert big.memory_used_bytes == 20 << 30 and big.memory_total_bytes == 71 * 10**9
    assert snap.utilization_ratio is None  # the parent has no utilization samples in MIG mode
    assert snap.memory_used_bytes == (2 << 34) + (20 << 30) + (1 << 30)  # its own load and the instances'
    assert source.errors.snapshot() == {}
    gpm_before = fake.open_gpm_samples
    fake.disable_mig(2)
    source.close()
    assert fake.open_gpm_samples == gpm_before - 2 * GPUS - 2 * 2


def test_running_totals_and_epochs(fake: FakeNvml, source: NvmlSource) -> None:
    first = source.read()[1]
    assert first.utilization_total is not None and first.utilization_total[0] / first.utilization_total[
        1
    ] == (pytest.approx(0.25))
    fake.step(2.0)
    second = source.read()[1]
    assert second.utilization_total is not None
    assert second.utilization_total[1] == first.utilization_total[1] + 12  # 6 samples a second
    assert second.sm_active_total is not None and second.epoch == first.epoch
    fake.lose_gpu(1)
    lost = source.read()[1]
    fake.restore_gpu(1)
    back = source.read()[1]
    assert lost.epoch == back.epoch == first.epoch + 1
    assert back.utilization_total is not None and back.utilization_total[1] < second.utilization_total[1]


def test_mig_mode_is_followed_on_slow_reads(fake: FakeNvml, source: NvmlSource) -> None:
    assert source.read_gpu(1).mig_enabled is False
    fake.enable_mig(1, ("7g.141gb",))
    assert source.read_gpu(1, slow=False).mig_instances == ()  # fast reads do not look
    snap = source.read_gpu(1, slow=True)
    assert snap.mig_enabled is True and [m.profile for m in snap.mig_instances] == ["7g.141gb"]
    fake.disable_mig(1)
    snap = source.read_gpu(1, slow=True)
    assert snap.mig_enabled is False and snap.mig_instances == ()
    assert source.errors.snapshot() == {}
