"""What one read of one GPU found, in base units (bytes, watts, joules, celsius, hertz, seconds).

None means unsupported or unreadable: the value is omitted, never reported as 0. Activity ratios come twice:
the mean over the read's own window (`*_ratio`) and a running total (`*_total`, a `Total`), from which any
consumer can take the mean over its own window (e.g. since its previous scrape) as delta sum / delta weight.
Totals restart when `epoch` changes (the GPU was lost and found again).
"""

from __future__ import annotations

from dataclasses import dataclass

Total = tuple[float, float]
"""A running (sum, weight) of an activity ratio: utilization samples and their count, or GPM ratio x seconds
and seconds."""


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Static facts about a GPU, read once."""

    name: str
    uuid: str
    pci_bus_id: str
    driver_version: str
    vbios_version: str


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG device of a GPU in MIG mode: its ids, and its memory and activity at the read."""

    gpu_instance: int
    compute_instance: int
    uuid: str
    profile: str  # e.g. "3g.71gb"
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilization_ratio: float | None = None  # graphics engine activity of its GPU instance (GPM)
    utilization_total: Total | None = None


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """One GPU at one read; see the module docstring."""

    index: int
    up: bool
    info: GpuInfo | None = None
    epoch: int = 0
    utilization_ratio: float | None = None
    memory_bandwidth_utilization_ratio: float | None = None
    sm_active_ratio: float | None = None
    tensor_active_ratio: float | None = None
    utilization_total: Total | None = None
    memory_bandwidth_total: Total | None = None
    sm_active_total: Total | None = None
    tensor_active_total: Total | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    memory_info_version: int | None = None  # 2: used excludes the driver's reserve (nvidia-smi), 1: includes
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    temperature_celsius: float | None = None
    memory_temperature_celsius: float | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    pcie_link_generation: int | None = None
    pcie_link_width: int | None = None
    pcie_replay_errors: int | None = None
    pcie_transmit_bytes_per_second: float | None = None
    pcie_receive_bytes_per_second: float | None = None
    ecc_corrected_errors: int | None = None
    ecc_uncorrected_errors: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    row_remap_pending: int | None = None
    row_remap_failure: int | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: int | None = None
    throttle_reasons: tuple[tuple[str, bool], ...] = ()  # (reason, active) for each supported reason
    clock_event_violation_seconds: tuple[tuple[str, float], ...] = ()  # (reason, seconds held back)
    nvlink_transmitted_bytes: tuple[tuple[int, int], ...] = ()  # (link, bytes)
    nvlink_received_bytes: tuple[tuple[int, int], ...] = ()
    nvlink_errors: tuple[tuple[int, str, int], ...] = ()  # (link, crc|replay|recovery, count)
    mig_enabled: bool | None = None  # None: the GPU has no MIG
    mig_instances: tuple[MigInstance, ...] = ()

    @property
    def uuid(self) -> str:
        """The GPU's UUID, or "" when it was never read."""
        return self.info.uuid if self.info is not None else ""
