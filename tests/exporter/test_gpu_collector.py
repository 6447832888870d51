"""GpuCollector end to end over the fake NVML: every GPU metric of the contract, faults, deadlines."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter import catalog
from exporter.collectors.gpu import GpuCollector, build_gpu_collector
from exporter.errors import SourceError
from exporter.sources.gpu_sampler import SamplingSettings
from foundation.collector import Collector
from foundation.exposition import MetricSpec, render
from foundation.registry import Registry
from simulator.fake_nvml import H200_SXM, V100_SXM2, FakeNvml
from tests.helpers import samples_of, wait_for

GPUS = 8
# Metrics only some GPUs have: retired pages (GPUs without row remapping), MIG devices (MIG mode); each has
# its own test below.
MODEL_DEPENDENT: tuple[MetricSpec, ...] = (
    catalog.GPU_RETIRED_PAGES,
    catalog.GPU_RETIRED_PAGES_PENDING,
    catalog.GPU_MIG_INFO,
    catalog.GPU_MIG_UTILIZATION,
    catalog.GPU_MIG_MEMORY_USED,
    catalog.GPU_MIG_MEMORY_TOTAL,
)
# Every GPU metric of docs/architecture.md §4 this collector writes (ibpool_gpu_job_info: the jobs collector).
ALL_GPU_SPECS: tuple[MetricSpec, ...] = tuple(
    spec
    for name, spec in vars(catalog).items()
    if name.startswith("GPU_") and isinstance(spec, MetricSpec) and spec is not catalog.GPU_JOB_INFO
)
GPU_SPECS = tuple(spec for spec in ALL_GPU_SPECS if spec not in MODEL_DEPENDENT)


@pytest.fixture
def fake() -> FakeNvml:
    nvml = FakeNvml(gpu_count=GPUS)
    for i in range(GPUS):
        nvml.set_load(
            i,
            utilization=i / 8,
            memory_bandwidth=i / 16,
            sm_active=i / 10,
            tensor_active=i / 20,
            memory_used_bytes=(i + 1) << 33,
            nvlink_tx=0.3,
            nvlink_rx=0.2,
        )
    nvml.step(60.0)
    return nvml


@pytest.fixture
def collector(fake: FakeNvml) -> Iterator[GpuCollector]:
    gpu = build_gpu_collector(fake, xid_timeout_ms=20)
    yield gpu
    gpu.close()
    fake.release_hangs()


def _scrape(collector: GpuCollector | Registry) -> str:
    return render(collector.collect())


def _by_gpu(text: str, name: str) -> dict[str, float]:
    """Samples of `name` keyed by the gpu label."""
    return {dict(labels)["gpu"]: value for labels, value in samples_of(text, name).items()}


def _scrape_until_gpu_succeeds(registry: Registry, attempts: int = 2000) -> str:
    for _ in range(attempts):
        text = _scrape(registry)
        if registry.status()["gpu"].success:
            return text
        time.sleep(0.005)
    raise AssertionError("the gpu collector never recovered")


def test_is_a_collector_named_gpu(collector: GpuCollector) -> None:
    assert isinstance(collector, Collector)
    assert collector.name == "gpu"


def test_every_gpu_metric_appears_with_its_labels(fake: FakeNvml, collector: GpuCollector) -> None:
    _scrape(collector)
    fake.inject_xid(4, 79)
    assert wait_for(lambda: collector.xid is not None and collector.xid.counts() != {})
    fake.step(15.0)
    text = _scrape(collector)
    parsed = {
        sample.name: family for family in text_string_to_metric_families(text) for sample in family.samples
    }
    for spec in GPU_SPECS:
        assert spec.name in parsed, spec.name
        family = parsed[spec.name]
        assert family.type == ("gauge" if spec.kind == "info" else spec.kind), spec.name
        samples = [s for s in family.samples if s.name == spec.name]
        assert all(tuple(s.labels) == spec.labels for s in samples), spec.name
        if spec is not catalog.GPU_XID_ERRORS:
            assert {s.labels["gpu"] for s in samples} == {str(i) for i in range(GPUS)}, spec.name
        assert {s.labels["uuid"] for s in samples} <= {fake.gpu(i).uuid for i in range(GPUS)}
    throttle = samples_of(text, catalog.GPU_THROTTLE_ACTIVE.name)
    assert {dict(k)["reason"] for k in throttle} == {
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "display_clock_setting",
    }
    links = samples_of(text, catalog.GPU_NVLINK_RX.name)
    assert {dict(k)["link"] for k in links} == {str(n) for n in range(18)}
    ecc = samples_of(text, catalog.GPU_ECC_ERRORS.name)
    assert {dict(k)["type"] for k in ecc} == {"corrected", "uncorrected"}
    remapped = samples_of(text, catalog.GPU_REMAPPED_ROWS.name)
    assert {dict(k)["type"] for k in remapped} == {"correctable", "uncorrectable"}
    nvlink_errors = samples_of(text, catalog.GPU_NVLINK_ERRORS.name)
    assert {(dict(k)["link"], dict(k)["type"]) for k in nvlink_errors} == {
        (str(n), t) for n in range(18) for t in ("crc", "replay", "recovery")
    }
    violation = samples_of(text, catalog.GPU_CLOCK_EVENT_VIOLATION.name)
    assert {dict(k)["reason"] for k in violation} == {
        "power",
        "thermal",
        "sync_boost",
        "board_limit",
        "low_utilization",
        "reliability",
    }
    pcie = samples_of(text, catalog.GPU_PCIE_THROUGHPUT.name)
    assert {dict(k)["direction"] for k in pcie} == {"transmit", "receive"}
    info = samples_of(text, catalog.GPU_INFO.name)
    labels = dict(next(k for k in info if dict(k)["gpu"] == "0"))
    assert labels["name"] == "NVIDIA H200" and labels["pci_bus_id"] == "00000000:18:00.0"
    assert (
        labels["driver_version"] == fake.driver_version and labels["vbios_version"] == H200_SXM.vbios_version
    )


def test_values_are_in_base_units(fake: FakeNvml, collector: GpuCollector) -> None:
    _scrape(collector)
    fake.step(15.0)
    text = _scrape(collector)
    gpu = fake.gpu(4)
    assert _by_gpu(text, "ibpool_gpu_power_watts")["4"] == pytest.approx(gpu.power_watts(), abs=0.001)
    assert _by_gpu(text, "ibpool_gpu_power_limit_watts")["4"] == 700
    assert _by_gpu(text, "ibpool_gpu_energy_joules_total")["4"] == pytest.approx(
        gpu.energy_mj / 1000, abs=0.002
    )
    assert _by_gpu(text, "ibpool_gpu_memory_total_bytes")["4"] == H200_SXM.memory_total_bytes
    assert _by_gpu(text, "ibpool_gpu_memory_used_bytes")["4"] == 5 << 33
    assert _by_gpu(text, "ibpool_gpu_sm_clock_hertz")["4"] == 1.98e9
    assert _by_gpu(text, "ibpool_gpu_utilization_ratio")["4"] == pytest.approx(0.5)
    assert _by_gpu(text, "ibpool_gpu_sm_active_ratio")["4"] == pytest.approx(0.4)
    assert _by_gpu(text, "ibpool_gpu_tensor_active_ratio")["4"] == pytest.approx(0.2)
    assert _by_gpu(text, "ibpool_gpu_temperature_celsius")["4"] == round(gpu.temperature)
    assert _by_gpu(text, "ibpool_gpu_pcie_link_generation")["4"] == 5
    assert _by_gpu(text, "ibpool_gpu_pcie_link_width")["4"] == 16
    tx = samples_of(text, "ibpool_gpu_nvlink_data_transmitted_bytes_total")
    link0 = next(v for k, v in tx.items() if dict(k)["gpu"] == "4" and dict(k)["link"] == "0")
    assert link0 == pytest.approx(gpu.nvlink_tx_bytes[0], abs=1024)


def test_not_supported_fields_are_omitted_not_zero(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.set_field_error(pynvml.NVML_FI_DEV_MEMORY_TEMP, gpu=3)
    fake.set_field_error(pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, gpu=3)
    fake.set_field_error(pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, gpu=3)
    fake.set_capabilities(3, gpm=False)
    _scrape(collector)
    fake.step(15.0)
    text = _scrape(collector)
    assert "3" not in _by_gpu(text, "ibpool_gpu_memory_temperature_celsius")
    assert "3" not in _by_gpu(text, "ibpool_gpu_sm_active_ratio")
    assert "3" in _by_gpu(text, "ibpool_gpu_power_watts")
    assert {"0", "1", "2"} <= set(_by_gpu(text, "ibpool_gpu_memory_temperature_celsius"))
    ecc_gpus = {dict(k)["gpu"] for k in samples_of(text, "ibpool_gpu_ecc_errors_total")}
    assert "3" not in ecc_gpus and "2" in ecc_gpus
    assert "ibpool_exporter_nvml_errors_total" not in text


def test_utilization_is_averaged_over_the_scrape_interval(fake: FakeNvml, collector: GpuCollector) -> None:
    _scrape(collector)
    fake.set_load(6, utilization=0.2)
    fake.step(5.0)
    fake.set_load(6, utilization=0.8)
    fake.step(5.0)
    text = _scrape(collector)
    assert _by_gpu(text, "ibpool_gpu_utilization_ratio")["6"] == pytest.approx(0.5, abs=0.02)


def test_a_lost_gpu_is_down_and_the_others_report(fake: FakeNvml, collector: GpuCollector) -> None:
    _scrape(collector)
    fake.lose_gpu(5)
    text = _scrape(collector)
    up = _by_gpu(text, "ibpool_gpu_up")
    assert up == {str(i): (0.0 if i == 5 else 1.0) for i in range(GPUS)}
    power = _by_gpu(text, "ibpool_gpu_power_watts")
    assert "5" not in power and len(power) == GPUS - 1
    up_labels = {dict(k)["gpu"]: dict(k)["uuid"] for k in samples_of(text, "ibpool_gpu_up")}
    assert up_labels["5"] == fake.gpu(5).uuid  # still labelled with its last known UUID
    fake.restore_gpu(5)
    assert _by_gpu(_scrape(collector), "ibpool_gpu_up")["5"] == 1


def test_a_hung_call_hits_the_deadline_then_recovers(fake: FakeNvml, collector: GpuCollector) -> None:
    registry = Registry([collector], deadlines={"gpu": 0.2})
    try:
        assert samples_of(_scrape(registry), "ibpool_exporter_collector_success") == {
            (("collector", "gpu"),): 1
        }
        fake.hang("nvmlDeviceGetFieldValues")
        text = _scrape(registry)
        assert fake.blocked == 1  # returned while the NVML call is still hung
        assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "gpu"),): 0}
        assert "ibpool_gpu_up" not in text
        assert "no answer" in (registry.status()["gpu"].error or "")
        text = _scrape(registry)  # fails fast: the worker is still busy with the hung call
        assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "gpu"),): 0}
        assert "has not returned" in (registry.status()["gpu"].error or "")
        fake.release_hangs()
        assert "ibpool_gpu_up" in _scrape_until_gpu_succeeds(registry)
    finally:
        fake.release_hangs()
        registry.close()


def test_xid_errors_are_counted_per_xid(fake: FakeNvml, collector: GpuCollector) -> None:
    _scrape(collector)
    fake.inject_xid(2, 79)
    fake.inject_xid(2, 48)
    fake.inject_xid(2, 79)
    xid = collector.xid
    assert xid is not None
    assert wait_for(lambda: sum(xid.counts().values()) == 3)
    xids = samples_of(_scrape(collector), "ibpool_gpu_xid_errors_total")
    uuid = fake.gpu(2).uuid
    assert xids == {
        (("gpu", "2"), ("uuid", uuid), ("xid", "48")): 1,
        (("gpu", "2"), ("uuid", uuid), ("xid", "79")): 2,
    }


def test_nvml_init_failure_fails_the_collector(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.fail_init(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(SourceError):
        collector.collect()
    registry = Registry([collector])
    text = _scrape(registry)
    assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "gpu"),): 0}
    fake.fail_init(None)
    text = _scrape(registry)
    assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "gpu"),): 1}


def test_nvml_errors_are_exported(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.set_call_error("nvmlDeviceGetClockInfo", pynvml.NVML_ERROR_UNKNOWN, gpu=0)
    _scrape(collector)
    text = _scrape(collector)
    errors = samples_of(text, "ibpool_exporter_nvml_errors_total")
    assert errors == {(("call", "nvmlDeviceGetClockInfo"), ("error", "Unknown")): 4}  # SM and memory clock
    assert "0" not in _by_gpu(text, "ibpool_gpu_sm_clock_hertz")


def test_uuid_of_serves_the_jobs_collector(fake: FakeNvml, collector: GpuCollector) -> None:
    _scrape(collector)
    assert collector.uuid_of(7) == fake.gpu(7).uuid


def test_real_pynvml_fails_cleanly_without_a_driver() -> None:
    collector = build_gpu_collector(pynvml)
    try:
        try:
            families = collector.collect()
        except SourceError as exc:  # no NVIDIA driver here: the expected case on CI machines
            assert isinstance(exc.__cause__, pynvml.NVMLError)
            registry = Registry([collector])
            text = _scrape(registry)
            assert samples_of(text, "ibpool_exporter_collector_success") == {(("collector", "gpu"),): 0}
        else:  # a machine with a GPU: the exposition must still parse
            assert list(text_string_to_metric_families(render(families)))
    finally:
        collector.close()


# --- what dcgm-exporter users expect ------------------------------------------------------------------


def test_memory_used_is_nvidia_smi_s_with_the_reserve_apart(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.set_capabilities(6, memory_v2=False)
    text = _scrape(collector)
    used = _by_gpu(text, "ibpool_gpu_memory_used_bytes")
    assert used["4"] == 5 << 33  # what the fixture's processes use: the driver's reserve is not in it
    assert _by_gpu(text, "ibpool_gpu_memory_reserved_bytes")["4"] == H200_SXM.memory_reserved_bytes
    versions = _by_gpu(text, "ibpool_gpu_memory_info_version")
    assert versions == {str(i): (1.0 if i == 6 else 2.0) for i in range(GPUS)}
    assert used["6"] == (7 << 33) + H200_SXM.memory_reserved_bytes  # v1: says so, and counts the reserve
    assert "6" not in _by_gpu(text, "ibpool_gpu_memory_reserved_bytes")


def test_reliability_counters(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.inject_row_remap(1, correctable=2, uncorrectable=1)
    fake.inject_row_remap(2, failure=True)
    fake.inject_nvlink_errors(3, link=5, crc=4, replay=1, recovery=2)
    text = _scrape(collector)
    remapped = samples_of(text, "ibpool_gpu_remapped_rows_total")
    uuid = fake.gpu(1).uuid
    assert remapped[(("gpu", "1"), ("type", "correctable"), ("uuid", uuid))] == 2
    assert remapped[(("gpu", "1"), ("type", "uncorrectable"), ("uuid", uuid))] == 1
    assert _by_gpu(text, "ibpool_gpu_row_remap_pending") == {str(i): float(i == 1) for i in range(GPUS)}
    assert _by_gpu(text, "ibpool_gpu_row_remap_failure") == {str(i): float(i == 2) for i in range(GPUS)}
    nvlink = samples_of(text, "ibpool_gpu_nvlink_errors_total")
    on_link5 = {
        dict(k)["type"]: v for k, v in nvlink.items() if dict(k)["gpu"] == "3" and dict(k)["link"] == "5"
    }
    assert on_link5 == {"crc": 4, "replay": 1, "recovery": 2}
    assert sum(nvlink.values()) == 7


def test_retired_pages_on_gpus_without_row_remapping() -> None:
    fake = FakeNvml(gpu_count=2, model=V100_SXM2)
    fake.inject_retired_pages(0, single_bit=3, double_bit=1, pending=True)
    collector = build_gpu_collector(fake, xid_timeout_ms=20)
    try:
        text = _scrape(collector)
    finally:
        collector.close()
    retired = samples_of(text, "ibpool_gpu_retired_pages_total")
    uuid = fake.gpu(0).uuid
    assert retired[(("cause", "single_bit_ecc"), ("gpu", "0"), ("uuid", uuid))] == 3
    assert retired[(("cause", "double_bit_ecc"), ("gpu", "0"), ("uuid", uuid))] == 1
    assert _by_gpu(text, "ibpool_gpu_retired_pages_pending") == {"0": 1, "1": 0}
    assert "ibpool_gpu_remapped_rows_total" not in text and "ibpool_gpu_mig_enabled" not in text
    assert "ibpool_exporter_nvml_errors_total" not in text


def test_violation_time_memory_clock_and_pcie_throughput(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.set_load(7, utilization=1.0, tensor_active=1.0, memory_bandwidth=1.0)
    before = samples_of(_scrape(collector), "ibpool_gpu_clock_event_violation_seconds_total")
    fake.step(30.0)
    text = _scrape(collector)
    after = samples_of(text, "ibpool_gpu_clock_event_violation_seconds_total")

    def grew(gpu: str, reason: str) -> float:
        key = next(k for k in after if dict(k)["gpu"] == gpu and dict(k)["reason"] == reason)
        return after[key] - before[key]

    assert grew("0", "low_utilization") == pytest.approx(30.0)  # GPU 0 idles in the fixture
    assert grew("7", "power") == pytest.approx(30.0) and grew("7", "low_utilization") == 0
    assert _by_gpu(text, "ibpool_gpu_memory_clock_hertz")["3"] == 3.201e9
    pcie = samples_of(text, "ibpool_gpu_pcie_throughput_bytes_per_second")
    tx7 = next(v for k, v in pcie.items() if dict(k)["gpu"] == "7" and dict(k)["direction"] == "transmit")
    assert tx7 == fake.gpu(7).pcie_kib_per_second(pynvml.NVML_PCIE_UTIL_TX_BYTES) * 1024 > 0


def test_mig_instances_are_labelled_with_their_utilization(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.enable_mig(5, ("4g.71gb", "2g.35gb", "1g.18gb"))
    for n, busy in enumerate((0.9, 0.5, 0.1)):
        fake.set_mig_load(5, n, utilization=busy, memory_used_bytes=(n + 1) << 30)
    _scrape(collector)
    fake.step(10.0)
    text = _scrape(collector)
    assert _by_gpu(text, "ibpool_gpu_mig_enabled") == {str(i): float(i == 5) for i in range(GPUS)}
    info = [dict(k) for k in samples_of(text, "ibpool_gpu_mig_instance_info")]
    assert [(i["gpu"], i["gpu_instance"], i["compute_instance"], i["profile"]) for i in info] == [
        ("5", "1", "0", "4g.71gb"),
        ("5", "2", "0", "2g.35gb"),
        ("5", "3", "0", "1g.18gb"),
    ]
    assert all(i["mig_uuid"].startswith("MIG-") and i["uuid"] == fake.gpu(5).uuid for i in info)
    utilization = {
        dict(k)["gpu_instance"]: v for k, v in samples_of(text, "ibpool_gpu_mig_utilization_ratio").items()
    }
    assert utilization == pytest.approx({"1": 0.9, "2": 0.5, "3": 0.1})
    used = {
        dict(k)["gpu_instance"]: v for k, v in samples_of(text, "ibpool_gpu_mig_memory_used_bytes").items()
    }
    assert used == {"1": 1 << 30, "2": 2 << 30, "3": 3 << 30}
    total = samples_of(text, "ibpool_gpu_mig_memory_total_bytes")
    assert sorted(total.values()) == [18e9, 35e9, 71e9]
    assert "5" not in _by_gpu(text, "ibpool_gpu_utilization_ratio")  # N/A in MIG mode, as in nvidia-smi
    assert "ibpool_exporter_nvml_errors_total" not in text


# --- sampled in the background ------------------------------------------------------------------------

FAST = SamplingSettings(interval_seconds=0.02, slow_interval_seconds=0.1, deadline_seconds=1.0)


@pytest.fixture
def sampled(fake: FakeNvml) -> Iterator[GpuCollector]:
    gpu = build_gpu_collector(fake, xid_timeout_ms=20, sampling=FAST)
    yield gpu
    fake.release_hangs()
    gpu.close()


def _reads_of_every_gpu(fake: FakeNvml, times: int = 2) -> bool:
    """Wait until the sampler has read every GPU `times` more times (each read takes its samples)."""
    start = fake.calls["nvmlDeviceGetSamples"]
    return wait_for(lambda: fake.calls["nvmlDeviceGetSamples"] >= start + 2 * GPUS * times)


def test_sampled_collector_serves_every_metric(fake: FakeNvml, sampled: GpuCollector) -> None:
    _scrape(sampled)
    fake.step(15.0)
    assert _reads_of_every_gpu(fake)
    text = _scrape(sampled)
    names = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    assert {spec.name for spec in GPU_SPECS if spec is not catalog.GPU_XID_ERRORS} <= names
    assert _by_gpu(text, "ibpool_gpu_up") == {str(i): 1.0 for i in range(GPUS)}
    assert _by_gpu(text, "ibpool_gpu_sample_stale") == {str(i): 0.0 for i in range(GPUS)}
    assert all(age < 5.0 for age in _by_gpu(text, "ibpool_gpu_sample_age_seconds").values())
    assert _by_gpu(text, "ibpool_gpu_power_watts")["4"] == pytest.approx(fake.gpu(4).power_watts(), abs=0.001)


def test_a_scrape_does_not_call_nvml(fake: FakeNvml, sampled: GpuCollector) -> None:
    _scrape(sampled)
    fake.stall_gpu(0)
    fake.stall_gpu(1)  # no more reads can finish on these two; the others go on
    fake.set_call_error("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_UNKNOWN)  # it would show if called
    text = _scrape(sampled)
    assert "ibpool_gpu_up" in text and "nvmlDeviceGetHandleByIndex" not in text


def test_a_stalled_gpu_does_not_stall_the_scrape(fake: FakeNvml, sampled: GpuCollector) -> None:
    _scrape(sampled)
    fake.stall_gpu(3)  # every call on GPU 3 blocks until released
    assert fake.wait_blocked()

    def gpu3_stale() -> bool:
        return _by_gpu(_scrape(sampled), "ibpool_gpu_sample_stale").get("3") == 1

    assert wait_for(gpu3_stale)
    samples_calls = fake.calls["nvmlDeviceGetSamples"]
    text = _scrape(sampled)  # answers while GPU 3 is still stalled
    assert fake.blocked == 1
    assert _by_gpu(text, "ibpool_gpu_up") == {str(i): float(i != 3) for i in range(GPUS)}
    assert _by_gpu(text, "ibpool_gpu_sample_stale") == {str(i): float(i == 3) for i in range(GPUS)}
    assert "3" not in _by_gpu(text, "ibpool_gpu_power_watts") and "2" in _by_gpu(
        text, "ibpool_gpu_power_watts"
    )
    assert _by_gpu(text, "ibpool_gpu_info")["3"] == 1  # still known, with its UUID
    ages = _by_gpu(text, "ibpool_gpu_sample_age_seconds")
    assert ages["3"] > FAST.deadline_seconds > max(v for k, v in ages.items() if k != "3")
    assert wait_for(
        lambda: fake.calls["nvmlDeviceGetSamples"] > samples_calls + 2 * (GPUS - 1)
    )  # the others go on
    assert "GPU 3" in (sampled.health_problem() or "")
    fake.release_hangs()
    assert wait_for(lambda: _by_gpu(_scrape(sampled), "ibpool_gpu_up").get("3") == 1)
    assert sampled.health_problem() is None


def test_utilization_is_averaged_since_the_previous_scrape_not_the_last_sample(
    fake: FakeNvml, sampled: GpuCollector
) -> None:
    _scrape(sampled)
    assert _reads_of_every_gpu(fake)
    _scrape(sampled)
    fake.set_load(6, utilization=0.2)
    fake.step(5.0)
    assert _reads_of_every_gpu(fake)  # the sampler's reads in between see 0.2 ...
    fake.set_load(6, utilization=0.8)
    fake.step(5.0)
    assert _reads_of_every_gpu(fake)  # ... then 0.8
    other = sampled.sharing()  # a second consumer, e.g. the InfluxDB push: its own window
    _scrape(other)
    text = _scrape(sampled)
    assert _by_gpu(text, "ibpool_gpu_utilization_ratio")["6"] == pytest.approx(0.5, abs=0.02)
    fake.step(3.0)
    assert _reads_of_every_gpu(fake)
    assert _by_gpu(_scrape(sampled), "ibpool_gpu_utilization_ratio")["6"] == pytest.approx(0.8)
    assert _by_gpu(_scrape(other), "ibpool_gpu_utilization_ratio")["6"] == pytest.approx(0.8)
    other.close()  # does not stop the owner's sampler
    assert _reads_of_every_gpu(fake, times=1)


def test_sampled_collector_fails_without_nvml_then_recovers(fake: FakeNvml) -> None:
    fake.fail_init(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    collector = build_gpu_collector(fake, xid_timeout_ms=20, sampling=FAST)
    try:
        with pytest.raises(SourceError, match="Driver Not Loaded"):
            collector.collect()
        fake.fail_init(None)
        assert wait_for(lambda: _try_collect(collector), timeout=15)
        assert collector.xid is not None and wait_for(collector.xid.is_alive)
    finally:
        collector.close()
    assert not fake.initialized


def _try_collect(collector: GpuCollector) -> bool:
    try:
        collector.collect()
    except SourceError:
        return False
    return True


def test_read_at_each_scrape_still_leaves_the_costly_values_to_the_slow_interval(fake: FakeNvml) -> None:
    collector = build_gpu_collector(fake, xid_timeout_ms=20, sampling=SamplingSettings(0.0, 3600.0, 1.0))
    try:
        first = _scrape(collector)
        calls = fake.calls.copy()
        fake.step(15.0)
        second = _scrape(collector)
    finally:
        collector.close()
    made = fake.calls - calls
    assert made["nvmlDeviceGetSamples"] == 2 * GPUS  # read now, at the scrape
    assert made["nvmlDeviceGetViolationStatus"] == made["nvmlDeviceGetPcieThroughput"] == 0
    energy = "ibpool_gpu_energy_joules_total"
    assert _by_gpu(second, energy) == _by_gpu(first, energy)  # the last slow read's
    assert _by_gpu(second, "ibpool_gpu_power_watts")["4"] == pytest.approx(
        fake.gpu(4).power_watts(), abs=0.001
    )
