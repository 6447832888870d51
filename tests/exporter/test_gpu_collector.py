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
from foundation.collector import Collector
from foundation.exposition import MetricSpec, render
from foundation.registry import Registry
from simulator.fake_nvml import H200_SXM, FakeNvml
from tests.helpers import samples_of, wait_for

GPUS = 8
# Every GPU metric of docs/architecture.md §4 this collector writes (ibpool_gpu_job_info: the jobs collector).
GPU_SPECS: tuple[MetricSpec, ...] = tuple(
    spec
    for name, spec in vars(catalog).items()
    if name.startswith("GPU_") and isinstance(spec, MetricSpec) and spec is not catalog.GPU_JOB_INFO
)


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
    assert errors == {(("call", "nvmlDeviceGetClockInfo"), ("error", "Unknown")): 2}
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
