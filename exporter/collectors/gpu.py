"""Maps GPU readings and XID counts to the catalog's GPU metric families (labels gpu = index, uuid).

The readings come from `ReadOnScrape` (NVML read in the scrape) or `GpuSampler` (the latest background
snapshots, exporter/sources/gpu_sampler.py). A stale GPU is served as up 0, stale 1 with its identity and
no values. Activity ratios are averaged since this collector's previous scrape (gpu_averages.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exporter import catalog
from exporter.collectors.gpu_averages import WindowAverages
from exporter.sources.gpu_sampler import GpuReading, GpuReadings, GpuSampler, ReadOnScrape, SamplingSettings
from exporter.sources.gpu_snapshot import GpuSnapshot
from exporter.sources.nvml_source import Nvml, NvmlErrorCounts, NvmlSource
from exporter.sources.xid_events import XidWatcher
from foundation.exposition import MetricFamily, MetricSpec

# (metric, snapshot attribute) for every single-valued GPU metric that is not an activity average.
_SCALARS: tuple[tuple[MetricSpec, str], ...] = (
    (catalog.GPU_MEMORY_USED, "memory_used_bytes"),
    (catalog.GPU_MEMORY_TOTAL, "memory_total_bytes"),
    (catalog.GPU_MEMORY_RESERVED, "memory_reserved_bytes"),
    (catalog.GPU_MEMORY_INFO_VERSION, "memory_info_version"),
    (catalog.GPU_POWER, "power_watts"),
    (catalog.GPU_POWER_LIMIT, "power_limit_watts"),
    (catalog.GPU_ENERGY, "energy_joules"),
    (catalog.GPU_TEMPERATURE, "temperature_celsius"),
    (catalog.GPU_MEMORY_TEMPERATURE, "memory_temperature_celsius"),
    (catalog.GPU_SM_CLOCK, "sm_clock_hertz"),
    (catalog.GPU_MEMORY_CLOCK, "memory_clock_hertz"),
    (catalog.GPU_PCIE_LINK_GENERATION, "pcie_link_generation"),
    (catalog.GPU_PCIE_LINK_WIDTH, "pcie_link_width"),
    (catalog.GPU_PCIE_REPLAY_ERRORS, "pcie_replay_errors"),
    (catalog.GPU_ROW_REMAP_PENDING, "row_remap_pending"),
    (catalog.GPU_ROW_REMAP_FAILURE, "row_remap_failure"),
    (catalog.GPU_RETIRED_PAGES_PENDING, "retired_pages_pending"),
)
# (metric, snapshot ratio attribute, snapshot running-total attribute): averaged per consumer.
_AVERAGES: tuple[tuple[MetricSpec, str, str], ...] = (
    (catalog.GPU_UTILIZATION, "utilization_ratio", "utilization_total"),
    (
        catalog.GPU_MEMORY_BANDWIDTH_UTILIZATION,
        "memory_bandwidth_utilization_ratio",
        "memory_bandwidth_total",
    ),
    (catalog.GPU_SM_ACTIVE, "sm_active_ratio", "sm_active_total"),
    (catalog.GPU_TENSOR_ACTIVE, "tensor_active_ratio", "tensor_active_total"),
)
# (metric, label value, snapshot attribute) for counters split by one label.
_LABELLED: tuple[tuple[MetricSpec, str, str], ...] = (
    (catalog.GPU_ECC_ERRORS, "corrected", "ecc_corrected_errors"),
    (catalog.GPU_ECC_ERRORS, "uncorrected", "ecc_uncorrected_errors"),
    (catalog.GPU_REMAPPED_ROWS, "correctable", "remapped_rows_correctable"),
    (catalog.GPU_REMAPPED_ROWS, "uncorrectable", "remapped_rows_uncorrectable"),
    (catalog.GPU_RETIRED_PAGES, "single_bit_ecc", "retired_pages_single_bit"),
    (catalog.GPU_RETIRED_PAGES, "double_bit_ecc", "retired_pages_double_bit"),
    (catalog.GPU_PCIE_THROUGHPUT, "transmit", "pcie_transmit_bytes_per_second"),
    (catalog.GPU_PCIE_THROUGHPUT, "receive", "pcie_receive_bytes_per_second"),
)


class _Families:
    """The families of one scrape, by metric name (a string's hash is cached; a spec's is not)."""

    def __init__(self) -> None:
        self.by_name: dict[str, MetricFamily] = {}

    def __getitem__(self, spec: MetricSpec) -> MetricFamily:
        family = self.by_name.get(spec.name)
        if family is None:
            family = self.by_name[spec.name] = MetricFamily(spec)
        return family


def gpu_families(
    readings: Sequence[GpuReading],
    xid_counts: Mapping[tuple[int, int], int],
    nvml_errors: Mapping[tuple[str, str], int],
    averages: WindowAverages | None = None,
) -> list[MetricFamily]:
    """The GPU metric families for one scrape; values that are None are omitted."""
    averages = averages if averages is not None else WindowAverages()
    f = _Families()
    uuids: dict[int, str] = {}
    for reading in readings:
        snap = reading.snapshot
        gpu, uuid = str(snap.index), snap.uuid
        uuids[snap.index] = uuid
        labels = (gpu, uuid)
        if snap.info is not None:
            i = snap.info
            f[catalog.GPU_INFO].add_info((gpu, uuid, i.name, i.pci_bus_id, i.driver_version, i.vbios_version))
        f[catalog.GPU_UP].add(labels, 1 if snap.up and not reading.stale else 0)
        f[catalog.GPU_SAMPLE_STALE].add(labels, 1 if reading.stale else 0)
        if reading.age_seconds is not None:
            f[catalog.GPU_SAMPLE_AGE].add(labels, reading.age_seconds)
        f[catalog.GPU_NVML_READ_SECONDS].add(labels, reading.read_seconds_total)
        if snap.up and not reading.stale:
            _add_values(f, snap, labels, averages)
    for (index, code), count in sorted(xid_counts.items()):
        if index in uuids:
            f[catalog.GPU_XID_ERRORS].add((str(index), uuids[index], str(code)), count)
    for (call, error), count in sorted(nvml_errors.items()):
        f[catalog.NVML_ERRORS].add((call, error), count)
    return [family for family in f.by_name.values() if family.samples]


def _add_values(f: _Families, snap: GpuSnapshot, labels: tuple[str, str], averages: WindowAverages) -> None:
    gpu, uuid = labels
    for spec, ratio_attr, total_attr in _AVERAGES:
        value = averages.mean(
            (snap.index, spec.name), snap.epoch, getattr(snap, total_attr), getattr(snap, ratio_attr)
        )
        if value is not None:
            f[spec].add(labels, value)
    for spec, attr in _SCALARS:
        value = getattr(snap, attr)
        if value is not None:
            f[spec].add(labels, value)
    for spec, label, attr in _LABELLED:
        value = getattr(snap, attr)
        if value is not None:
            f[spec].add((gpu, uuid, label), value)
    family = f[catalog.GPU_THROTTLE_ACTIVE]
    for reason, active in snap.throttle_reasons:
        family.add((gpu, uuid, reason), 1 if active else 0)
    family = f[catalog.GPU_CLOCK_EVENT_VIOLATION]
    for reason, seconds in snap.clock_event_violation_seconds:
        family.add((gpu, uuid, reason), seconds)
    family = f[catalog.GPU_NVLINK_TX]
    for link, value in snap.nvlink_transmitted_bytes:
        family.add((gpu, uuid, str(link)), value)
    family = f[catalog.GPU_NVLINK_RX]
    for link, value in snap.nvlink_received_bytes:
        family.add((gpu, uuid, str(link)), value)
    family = f[catalog.GPU_NVLINK_ERRORS]
    for link, kind, count in snap.nvlink_errors:
        family.add((gpu, uuid, str(link), kind), count)
    if snap.mig_enabled is not None:
        f[catalog.GPU_MIG_ENABLED].add(labels, 1 if snap.mig_enabled else 0)
    for mig in snap.mig_instances:
        ids = (gpu, uuid, str(mig.gpu_instance), str(mig.compute_instance))
        f[catalog.GPU_MIG_INFO].add_info((*ids, mig.uuid, mig.profile))
        key = (snap.index, "mig", mig.gpu_instance, mig.compute_instance)
        utilization = averages.mean(key, snap.epoch, mig.utilization_total, mig.utilization_ratio)
        if utilization is not None:
            f[catalog.GPU_MIG_UTILIZATION].add(ids, utilization)
        if mig.memory_used_bytes is not None:
            f[catalog.GPU_MIG_MEMORY_USED].add(ids, mig.memory_used_bytes)
        if mig.memory_total_bytes is not None:
            f[catalog.GPU_MIG_MEMORY_TOTAL].add(ids, mig.memory_total_bytes)


class GpuCollector:
    """The "gpu" collector: takes the readings, maps them with this collector's own activity averages.

    `collect()` raises SourceError when NVML is unavailable, so the registry reports the collector failed.
    `ibpool_gpu_job_info` is not written here: the jobs collector does that (pass it `uuid_of`). A collector
    made with `owns_readings=False` shares another's readings (e.g. the InfluxDB push beside Prometheus) and
    leaves closing them to their owner.
    """

    name = "gpu"

    def __init__(self, readings: GpuReadings, owns_readings: bool = True) -> None:
        self.readings = readings
        self.xid = readings.xid
        self._owns = owns_readings
        self._averages = WindowAverages()

    @property
    def errors(self) -> NvmlErrorCounts:
        """The NVML error counts the readings keep."""
        return self.readings.errors

    def collect(self) -> list[MetricFamily]:
        """Map the current readings (read now, or the latest samples) to families."""
        readings = self.readings.readings()
        counts: Mapping[tuple[int, int], int] = self.xid.counts() if self.xid is not None else {}
        return gpu_families(readings, counts, self.readings.errors.snapshot(), self._averages)

    def sharing(self) -> GpuCollector:
        """A second collector over the same readings, with its own averages (it does not close them)."""
        return GpuCollector(self.readings, owns_readings=False)

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index`, or None."""
        return self.readings.uuid_of(index)

    def health_problem(self) -> str | None:
        """A reason for /healthz when a GPU's read is stuck, else None."""
        return self.readings.health_problem()

    def close(self) -> None:
        """Stop sampling and the XID thread, shut NVML down (if these readings are this collector's)."""
        if self._owns:
            self.readings.close()


def build_gpu_collector(
    nvml: Nvml, xid_timeout_ms: int = 500, sampling: SamplingSettings | None = None
) -> GpuCollector:
    """A GpuCollector over `nvml` (the pynvml module or a FakeNvml). Without `sampling` every GPU is read in
    full at each scrape; with an interval of 0 read at each scrape, the costly values every slow interval;
    otherwise sampled in the background. Its source and XID watcher share one error count. Touches no
    hardware until the first `collect()`."""
    errors = NvmlErrorCounts()
    source = NvmlSource(nvml, errors)
    xid = XidWatcher(nvml, errors, xid_timeout_ms)
    readings: GpuReadings
    if sampling is None:
        readings = ReadOnScrape(source, xid)
    elif sampling.interval_seconds <= 0:
        readings = ReadOnScrape(source, xid, sampling.slow_interval_seconds)
    else:
        readings = GpuSampler(source, sampling, xid)
    return GpuCollector(readings)
