"""Maps NVML snapshots and XID counts to the catalog's GPU metric families (labels gpu = index, uuid)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exporter import catalog
from exporter.sources.nvml_source import GpuSnapshot, Nvml, NvmlErrorCounts, NvmlSource
from exporter.sources.xid_events import XidWatcher
from foundation.exposition import MetricFamily, MetricSpec

# (metric, snapshot attribute) for every single-valued GPU metric.
_SCALARS: tuple[tuple[MetricSpec, str], ...] = (
    (catalog.GPU_UTILIZATION, "utilization_ratio"),
    (catalog.GPU_MEMORY_BANDWIDTH_UTILIZATION, "memory_bandwidth_utilization_ratio"),
    (catalog.GPU_SM_ACTIVE, "sm_active_ratio"),
    (catalog.GPU_TENSOR_ACTIVE, "tensor_active_ratio"),
    (catalog.GPU_MEMORY_USED, "memory_used_bytes"),
    (catalog.GPU_MEMORY_TOTAL, "memory_total_bytes"),
    (catalog.GPU_POWER, "power_watts"),
    (catalog.GPU_POWER_LIMIT, "power_limit_watts"),
    (catalog.GPU_ENERGY, "energy_joules"),
    (catalog.GPU_TEMPERATURE, "temperature_celsius"),
    (catalog.GPU_MEMORY_TEMPERATURE, "memory_temperature_celsius"),
    (catalog.GPU_SM_CLOCK, "sm_clock_hertz"),
    (catalog.GPU_PCIE_LINK_GENERATION, "pcie_link_generation"),
    (catalog.GPU_PCIE_LINK_WIDTH, "pcie_link_width"),
    (catalog.GPU_PCIE_REPLAY_ERRORS, "pcie_replay_errors"),
)


def gpu_families(
    snapshots: Sequence[GpuSnapshot],
    xid_counts: Mapping[tuple[int, int], int],
    nvml_errors: Mapping[tuple[str, str], int],
) -> list[MetricFamily]:
    """The GPU metric families for one scrape; values that are None are omitted."""
    info = MetricFamily(catalog.GPU_INFO)
    up = MetricFamily(catalog.GPU_UP)
    scalars = [(MetricFamily(spec), attr) for spec, attr in _SCALARS]
    throttle = MetricFamily(catalog.GPU_THROTTLE_ACTIVE)
    nvlink_tx = MetricFamily(catalog.GPU_NVLINK_TX)
    nvlink_rx = MetricFamily(catalog.GPU_NVLINK_RX)
    ecc = MetricFamily(catalog.GPU_ECC_ERRORS)
    xid = MetricFamily(catalog.GPU_XID_ERRORS)
    uuids: dict[int, str] = {}
    for snap in snapshots:
        gpu, uuid = str(snap.index), snap.uuid
        uuids[snap.index] = uuid
        labels = (gpu, uuid)
        if snap.info is not None:
            i = snap.info
            info.add_info((gpu, uuid, i.name, i.pci_bus_id, i.driver_version, i.vbios_version))
        up.add(labels, 1 if snap.up else 0)
        if not snap.up:
            continue
        for family, attr in scalars:
            value = getattr(snap, attr)
            if value is not None:
                family.add(labels, value)
        for reason, active in snap.throttle_reasons:
            throttle.add((gpu, uuid, reason), 1 if active else 0)
        for link, value in snap.nvlink_transmitted_bytes:
            nvlink_tx.add((gpu, uuid, str(link)), value)
        for link, value in snap.nvlink_received_bytes:
            nvlink_rx.add((gpu, uuid, str(link)), value)
        if snap.ecc_corrected_errors is not None:
            ecc.add((gpu, uuid, "corrected"), snap.ecc_corrected_errors)
        if snap.ecc_uncorrected_errors is not None:
            ecc.add((gpu, uuid, "uncorrected"), snap.ecc_uncorrected_errors)
    for (index, code), count in sorted(xid_counts.items()):
        if index in uuids:
            xid.add((str(index), uuids[index], str(code)), count)
    errors = MetricFamily(catalog.NVML_ERRORS)
    for (call, error), count in sorted(nvml_errors.items()):
        errors.add((call, error), count)
    families = [info, up, *(f for f, _ in scalars), throttle, nvlink_tx, nvlink_rx, ecc, xid, errors]
    return [f for f in families if f.samples]


class GpuCollector:
    """The "gpu" collector: reads the source, starts the XID watcher once NVML works, maps the result.

    `collect()` raises SourceError when NVML is unavailable, so the registry reports the collector failed.
    `ibpool_gpu_job_info` is not written here: the jobs collector does that (pass it `uuid_of`).
    """

    name = "gpu"

    def __init__(self, source: NvmlSource, xid: XidWatcher | None = None) -> None:
        self.source = source
        self.xid = xid

    def collect(self) -> list[MetricFamily]:
        """Read every GPU once and return the families."""
        snapshots = self.source.read()
        counts: Mapping[tuple[int, int], int] = {}
        if self.xid is not None:
            self.xid.ensure_started()
            counts = self.xid.counts()
        return gpu_families(snapshots, counts, self.source.errors.snapshot())

    def uuid_of(self, index: int) -> str | None:
        """The last known UUID of GPU `index`, or None."""
        return self.source.uuid_of(index)

    def close(self) -> None:
        """Stop the XID thread and shut NVML down."""
        if self.xid is not None:
            self.xid.stop()
        self.source.close()


def build_gpu_collector(nvml: Nvml, xid_timeout_ms: int = 500) -> GpuCollector:
    """A GpuCollector over `nvml` (the pynvml module or a FakeNvml), its source and XID watcher sharing
    one error count. Touches no hardware until the first `collect()`."""
    errors = NvmlErrorCounts()
    return GpuCollector(NvmlSource(nvml, errors), XidWatcher(nvml, errors, xid_timeout_ms))
