"""The one catalog of every metric ibpool's node exporter writes (docs/architecture.md §4).

Collectors refer to these specs; nothing else defines a metric name.
"""

from __future__ import annotations

from foundation import ib_counters
from foundation.exposition import MetricSpec
from foundation.process_metrics import PROCESS_METRICS
from foundation.registry import BUILD_INFO, COLLECTOR_DURATION, COLLECTOR_SUCCESS

# The self metrics every ibpool exporter serves are defined with the registry and the metrics route
# (process CPU, memory, fds, start time, scrape duration); listed here with the rest.
SELF_METRICS = (COLLECTOR_SUCCESS, COLLECTOR_DURATION, BUILD_INFO, *PROCESS_METRICS)
PROCESS_SELF_METRICS = {spec.name: spec for spec in PROCESS_METRICS}

PREFIX = "ibpool_"

# --- GPU (labels gpu = index, uuid) -------------------------------------------------------------
_G = ("gpu", "uuid")

GPU_INFO = MetricSpec(
    "ibpool_gpu_info",
    "info",
    "Static facts about a GPU; value is always 1.",
    ("gpu", "uuid", "name", "pci_bus_id", "driver_version", "vbios_version"),
)
GPU_UP = MetricSpec(
    "ibpool_gpu_up",
    "gauge",
    "1 if the GPU answered NVML at its latest read, 0 if it is lost or its read is stuck (stale).",
    _G,
)
GPU_SAMPLE_AGE = MetricSpec(
    "ibpool_gpu_sample_age_seconds",
    "gauge",
    "Seconds since the GPU's latest NVML read finished (the values served are that old).",
    _G,
)
GPU_SAMPLE_STALE = MetricSpec(
    "ibpool_gpu_sample_stale",
    "gauge",
    "1 while the GPU's NVML read is stuck beyond --gpu.deadline-seconds; its values are then left out.",
    _G,
)
GPU_NVML_READ_SECONDS = MetricSpec(
    "ibpool_gpu_nvml_read_seconds_total",
    "counter",
    "Time spent reading the GPU through NVML (the driver's cost of watching it).",
    _G,
)
GPU_UTILIZATION = MetricSpec(
    "ibpool_gpu_utilization_ratio",
    "gauge",
    "Fraction of time a kernel ran, averaged over NVML samples since the previous scrape.",
    _G,
)
GPU_MEMORY_BANDWIDTH_UTILIZATION = MetricSpec(
    "ibpool_gpu_memory_bandwidth_utilization_ratio",
    "gauge",
    "Fraction of time device memory was read or written, averaged since the previous scrape.",
    _G,
)
GPU_SM_ACTIVE = MetricSpec(
    "ibpool_gpu_sm_active_ratio",
    "gauge",
    "Fraction of SM cycles with a warp resident (GPM, Hopper+).",
    _G,
)
GPU_TENSOR_ACTIVE = MetricSpec(
    "ibpool_gpu_tensor_active_ratio",
    "gauge",
    "Fraction of cycles a tensor pipe was active (GPM, Hopper+).",
    _G,
)
GPU_MEMORY_USED = MetricSpec(
    "ibpool_gpu_memory_used_bytes",
    "gauge",
    "Device memory in use; excludes the driver's reserve where ibpool_gpu_memory_info_version is 2 "
    "(as nvidia-smi shows it).",
    _G,
)
GPU_MEMORY_TOTAL = MetricSpec("ibpool_gpu_memory_total_bytes", "gauge", "Device memory installed.", _G)
GPU_MEMORY_RESERVED = MetricSpec(
    "ibpool_gpu_memory_reserved_bytes",
    "gauge",
    "Device memory the driver reserves for itself (nvmlDeviceGetMemoryInfo_v2).",
    _G,
)
GPU_MEMORY_INFO_VERSION = MetricSpec(
    "ibpool_gpu_memory_info_version",
    "gauge",
    "Which nvmlDeviceGetMemoryInfo the memory figures come from: 2 (used excludes the reserve) "
    "or 1 (used includes it).",
    _G,
)
GPU_POWER = MetricSpec("ibpool_gpu_power_watts", "gauge", "Power drawn by the board.", _G)
GPU_POWER_LIMIT = MetricSpec("ibpool_gpu_power_limit_watts", "gauge", "Enforced power limit.", _G)
GPU_ENERGY = MetricSpec(
    "ibpool_gpu_energy_joules_total",
    "counter",
    "Energy used since the driver was loaded.",
    _G,
)
GPU_TEMPERATURE = MetricSpec("ibpool_gpu_temperature_celsius", "gauge", "GPU core temperature.", _G)
GPU_MEMORY_TEMPERATURE = MetricSpec(
    "ibpool_gpu_memory_temperature_celsius",
    "gauge",
    "HBM temperature.",
    _G,
)
GPU_SM_CLOCK = MetricSpec("ibpool_gpu_sm_clock_hertz", "gauge", "Current SM clock.", _G)
GPU_MEMORY_CLOCK = MetricSpec("ibpool_gpu_memory_clock_hertz", "gauge", "Current memory clock.", _G)
GPU_CLOCK_EVENT_VIOLATION = MetricSpec(
    "ibpool_gpu_clock_event_violation_seconds_total",
    "counter",
    "Time clocks were held below their target, by reason (nvmlDeviceGetViolationStatus).",
    ("gpu", "uuid", "reason"),
)
GPU_THROTTLE_ACTIVE = MetricSpec(
    "ibpool_gpu_throttle_active",
    "gauge",
    "1 while the named clock-throttle reason is active.",
    ("gpu", "uuid", "reason"),
)
GPU_PCIE_LINK_GENERATION = MetricSpec(
    "ibpool_gpu_pcie_link_generation",
    "gauge",
    "Current PCIe link generation.",
    _G,
)
GPU_PCIE_LINK_WIDTH = MetricSpec(
    "ibpool_gpu_pcie_link_width", "gauge", "Current PCIe link width (lanes).", _G
)
GPU_PCIE_REPLAY_ERRORS = MetricSpec(
    "ibpool_gpu_pcie_replay_errors_total",
    "counter",
    "PCIe replay events.",
    _G,
)
GPU_PCIE_THROUGHPUT = MetricSpec(
    "ibpool_gpu_pcie_throughput_bytes_per_second",
    "gauge",
    "PCIe throughput over the driver's ~20 ms sample at the latest slow read, by direction.",
    ("gpu", "uuid", "direction"),
)
GPU_NVLINK_TX = MetricSpec(
    "ibpool_gpu_nvlink_data_transmitted_bytes_total",
    "counter",
    "NVLink data bytes transmitted.",
    ("gpu", "uuid", "link"),
)
GPU_NVLINK_RX = MetricSpec(
    "ibpool_gpu_nvlink_data_received_bytes_total",
    "counter",
    "NVLink data bytes received.",
    ("gpu", "uuid", "link"),
)
GPU_NVLINK_ERRORS = MetricSpec(
    "ibpool_gpu_nvlink_errors_total",
    "counter",
    "NVLink data-link errors per link, by type (crc, replay, recovery).",
    ("gpu", "uuid", "link", "type"),
)
GPU_XID_ERRORS = MetricSpec(
    "ibpool_gpu_xid_errors_total",
    "counter",
    "XID errors seen since the exporter started, by XID.",
    ("gpu", "uuid", "xid"),
)
GPU_ECC_ERRORS = MetricSpec(
    "ibpool_gpu_ecc_errors_total",
    "counter",
    "ECC errors (volatile, since the driver was loaded).",
    ("gpu", "uuid", "type"),
)
GPU_REMAPPED_ROWS = MetricSpec(
    "ibpool_gpu_remapped_rows_total",
    "counter",
    "Memory rows remapped after ECC errors, by type (correctable, uncorrectable); kept across reboots.",
    ("gpu", "uuid", "type"),
)
GPU_ROW_REMAP_PENDING = MetricSpec(
    "ibpool_gpu_row_remap_pending",
    "gauge",
    "1 while a row remap waits for a GPU reset to take effect.",
    _G,
)
GPU_ROW_REMAP_FAILURE = MetricSpec(
    "ibpool_gpu_row_remap_failure",
    "gauge",
    "1 if a row remap failed (no spare row left): the GPU needs service.",
    _G,
)
GPU_RETIRED_PAGES = MetricSpec(
    "ibpool_gpu_retired_pages_total",
    "counter",
    "Memory pages retired after ECC errors, by cause (GPUs without row remapping).",
    ("gpu", "uuid", "cause"),
)
GPU_RETIRED_PAGES_PENDING = MetricSpec(
    "ibpool_gpu_retired_pages_pending",
    "gauge",
    "1 while a page retirement waits for a GPU reset or driver reload.",
    _G,
)
GPU_MIG_ENABLED = MetricSpec("ibpool_gpu_mig_enabled", "gauge", "1 if the GPU is in MIG mode.", _G)
_MIG = ("gpu", "uuid", "gpu_instance", "compute_instance")
GPU_MIG_INFO = MetricSpec(
    "ibpool_gpu_mig_instance_info",
    "info",
    "A MIG device of the GPU; value is always 1.",
    (*_MIG, "mig_uuid", "profile"),
)
GPU_MIG_UTILIZATION = MetricSpec(
    "ibpool_gpu_mig_utilization_ratio",
    "gauge",
    "Graphics engine activity of the MIG device's GPU instance, averaged since the previous scrape (GPM).",
    _MIG,
)
GPU_MIG_MEMORY_USED = MetricSpec(
    "ibpool_gpu_mig_memory_used_bytes", "gauge", "Device memory the MIG device uses.", _MIG
)
GPU_MIG_MEMORY_TOTAL = MetricSpec(
    "ibpool_gpu_mig_memory_total_bytes", "gauge", "Device memory of the MIG device.", _MIG
)
GPU_JOB_INFO = MetricSpec(
    "ibpool_gpu_job_info",
    "info",
    "The scheduler job and pool a GPU is assigned to; value is always 1.",
    ("gpu", "uuid", "job", "pool"),
)

# --- InfiniBand, node side (labels device, port) -------------------------------------------------
# node_exporter's `infiniband` collector names under our prefix (same labels, same values).
_P = ("device", "port")


def _ib(suffix: str, kind: str, help_text: str, labels: tuple[str, ...] = _P) -> MetricSpec:
    return MetricSpec(f"ibpool_infiniband_{suffix}", kind, help_text, labels)  # type: ignore[arg-type]


IB_INFO = _ib(
    "info",
    "info",
    "Static facts about an InfiniBand device; value is always 1.",
    ("device", "board_id", "firmware_version", "hca_type"),
)
IB_STATE_ID = _ib("state_id", "gauge", "Logical port state (1 down, 2 init, 3 armed, 4 active, 5 act defer).")
IB_PHYSICAL_STATE_ID = _ib(
    "physical_state_id",
    "gauge",
    "Physical port state (2 polling, 3 disabled, 5 link up, 6 error recovery, ...).",
)
IB_RATE = _ib("rate_bytes_per_second", "gauge", "Signalling rate of the port.")

# sysfs counter file -> (metric suffix, help); widths and multipliers are in foundation.ib_counters.
_IB_COUNTER_METRICS: dict[str, tuple[str, str]] = {
    "excessive_buffer_overrun_errors": (
        "excessive_buffer_overrun_errors_total",
        "Consecutive flow-control periods with overrun.",
    ),
    "link_downed": ("link_downed_total", "Times the link failed to recover and went down."),
    "link_error_recovery": ("link_error_recovery_total", "Times the link recovered from an error state."),
    "local_link_integrity_errors": (
        "local_link_integrity_errors_total",
        "Times local physical errors crossed their threshold.",
    ),
    "multicast_rcv_packets": (
        "multicast_packets_received_total",
        "Multicast packets received (including errors).",
    ),
    "multicast_xmit_packets": (
        "multicast_packets_transmitted_total",
        "Multicast packets transmitted (including errors).",
    ),
    "port_rcv_constraint_errors": (
        "port_constraint_errors_received_total",
        "Received packets discarded by constraints.",
    ),
    "port_xmit_constraint_errors": (
        "port_constraint_errors_transmitted_total",
        "Packets not transmitted due to constraints.",
    ),
    "port_rcv_data": ("port_data_received_bytes_total", "Data bytes received."),
    "port_xmit_data": ("port_data_transmitted_bytes_total", "Data bytes transmitted."),
    "port_rcv_discards": ("port_discards_received_total", "Inbound packets discarded."),
    "port_xmit_discards": (
        "port_discards_transmitted_total",
        "Outbound packets discarded (port down or congested).",
    ),
    "port_rcv_errors": ("port_errors_received_total", "Received packets containing an error."),
    "port_rcv_packets": ("port_packets_received_total", "Packets received on all VLs."),
    "port_xmit_packets": ("port_packets_transmitted_total", "Packets transmitted on all VLs."),
    "port_xmit_wait": ("port_transmit_wait_total", "Ticks during which data waited to be sent (congestion)."),
    "port_rcv_remote_physical_errors": (
        "port_receive_remote_physical_errors_total",
        "Packets received marked bad by the sender.",
    ),
    "port_rcv_switch_relay_errors": (
        "port_receive_switch_relay_errors_total",
        "Packets the switch could not forward.",
    ),
    "symbol_error": ("symbol_error_total", "Minor link errors on one or more lanes."),
    "unicast_rcv_packets": ("unicast_packets_received_total", "Unicast packets received (including errors)."),
    "unicast_xmit_packets": (
        "unicast_packets_transmitted_total",
        "Unicast packets transmitted (including errors).",
    ),
    "VL15_dropped": ("vl15_dropped_total", "Incoming VL15 packets dropped."),
}
# mlx4's legacy `counters_ext` directory.
_IB_LEGACY_METRICS: dict[str, tuple[str, str]] = {
    "port_multicast_rcv_packets": (
        "legacy_multicast_packets_received_total",
        "Multicast packets received (counters_ext).",
    ),
    "port_multicast_xmit_packets": (
        "legacy_multicast_packets_transmitted_total",
        "Multicast packets transmitted (counters_ext).",
    ),
    "port_rcv_data_64": ("legacy_data_received_bytes_total", "Data bytes received (counters_ext)."),
    "port_rcv_packets_64": ("legacy_packets_received_total", "Packets received (counters_ext)."),
    "port_unicast_rcv_packets": (
        "legacy_unicast_packets_received_total",
        "Unicast packets received (counters_ext).",
    ),
    "port_unicast_xmit_packets": (
        "legacy_unicast_packets_transmitted_total",
        "Unicast packets transmitted (counters_ext).",
    ),
    "port_xmit_data_64": ("legacy_data_transmitted_bytes_total", "Data bytes transmitted (counters_ext)."),
    "port_xmit_packets_64": ("legacy_packets_transmitted_total", "Packets transmitted (counters_ext)."),
}


def _counter_specs(
    metrics: dict[str, tuple[str, str]], table: dict[str, ib_counters.IbCounter]
) -> dict[str, tuple[MetricSpec, int]]:
    """sysfs counter file -> (metric, multiplier from the counter table), in `metrics` order."""
    if set(metrics) != set(table):
        raise ValueError(
            f"counters without a metric or metrics without a counter: {set(metrics) ^ set(table)}"
        )
    return {
        name: (_ib(suffix, "counter", help_text), table[name].multiplier)
        for name, (suffix, help_text) in metrics.items()
    }


# sysfs counter file -> (metric, multiplier). Data counters count 4-byte words.
IB_COUNTERS = _counter_specs(_IB_COUNTER_METRICS, ib_counters.BY_SYSFS)
IB_LEGACY_COUNTERS = _counter_specs(_IB_LEGACY_METRICS, ib_counters.LEGACY_BY_SYSFS)
# Counters that are 32 bits wide in the IB PortCounters attribute and so can saturate.
IB_32BIT_COUNTERS = ib_counters.SATURATING_32

IB_PORT_INFO = _ib(
    "port_info",
    "info",
    "Static facts about an InfiniBand port; value is always 1.",
    (
        "device",
        "port",
        "link_layer",
        "node_guid",
        "port_guid",
        "hca_type",
        "firmware_version",
        "board_id",
        "link_speed",
    ),
)
IB_LINK_WIDTH = _ib("link_width_lanes", "gauge", "Active link width in lanes (parsed from the rate).")
IB_ACTIVE_MTU = _ib("active_mtu_bytes", "gauge", "Active MTU (verbs).")
IB_MAX_MTU = _ib("max_mtu_bytes", "gauge", "Maximum MTU the port supports (verbs).")
IB_HW_COUNTER = _ib(
    "hw_counter_total",
    "counter",
    "Driver hardware counter (hw_counters directory), by name.",
    ("device", "port", "counter"),
)
IB_COUNTER_SATURATED = _ib(
    "counter_saturated",
    "gauge",
    "1 when a 32-bit port counter sits at 2^32-1 and no longer counts.",
    ("device", "port", "counter"),
)
IB_READ_ERRORS = MetricSpec(
    "ibpool_exporter_sysfs_read_errors_total",
    "counter",
    "sysfs values that could not be read or parsed and were skipped, by reason.",
    ("reason",),
)

# --- Self ---------------------------------------------------------------------------------------
NVML_ERRORS = MetricSpec(
    "ibpool_exporter_nvml_errors_total",
    "counter",
    "NVML calls that failed, by call and error.",
    ("call", "error"),
)
JOB_MAP_ERRORS = MetricSpec(
    "ibpool_exporter_job_map_errors_total",
    "counter",
    "Job mapping files that could not be read or parsed and were skipped.",
    ("reason",),
)

# --- Fabric (one management host; labels node_guid, port, node_desc) ------------------------------
_F = ("node_guid", "port", "node_desc")


def _fabric_twin(spec: MetricSpec) -> MetricSpec:
    """The fabric-side twin of a node-side port metric: same suffix, fabric labels."""
    suffix = spec.name.removeprefix("ibpool_infiniband_").removeprefix("port_")
    return MetricSpec(f"ibpool_fabric_port_{suffix}", spec.kind, spec.help, _F)


# sysfs counter name (the node side's key) -> fabric spec; perfquery field names map onto these keys.
FABRIC_COUNTERS: dict[str, MetricSpec] = {name: _fabric_twin(spec) for name, (spec, _) in IB_COUNTERS.items()}
FABRIC_STATE_ID = _fabric_twin(IB_STATE_ID)
FABRIC_PHYSICAL_STATE_ID = _fabric_twin(IB_PHYSICAL_STATE_ID)
FABRIC_RATE = _fabric_twin(IB_RATE)
FABRIC_LINK_WIDTH = _fabric_twin(IB_LINK_WIDTH)
FABRIC_COUNTER_SATURATED = MetricSpec(
    "ibpool_fabric_port_counter_saturated",
    "gauge",
    "1 when a 32-bit port counter sits at 2^32-1 and no longer counts.",
    (*_F, "counter"),
)
FABRIC_VL_TRANSMIT_WAIT = MetricSpec(
    "ibpool_fabric_port_vl_transmit_wait_total",
    "counter",
    "Ticks data waited to be sent, per virtual lane.",
    (*_F, "vl"),
)
FABRIC_PORT_UP = MetricSpec(
    "ibpool_fabric_port_scrape_success",
    "gauge",
    "1 if the port's counters were read in the last sweep.",
    _F,
)
FABRIC_LINK_INFO = MetricSpec(
    "ibpool_fabric_link_info",
    "info",
    "A cable between two ports of the fabric; value is always 1.",
    ("node_guid", "port", "node_desc", "remote_guid", "remote_port", "remote_desc"),
)
FABRIC_SWITCH_UP = MetricSpec(
    "ibpool_fabric_switch_up",
    "gauge",
    "1 if the switch answered in the last sweep.",
    ("node_guid", "node_desc"),
)
FABRIC_VLARB_UP = MetricSpec(
    "ibpool_fabric_port_vlarb_scrape_success",
    "gauge",
    "1 if the port's VL arbitration tables (smpquery vlarb) were read in the last sweep, 0 if not; "
    "absent for ports not read (--fabric.vlarb-ports).",
    _F,
)
FABRIC_PORT_ROUTE_INFO = MetricSpec(
    "ibpool_fabric_port_route_info",
    "info",
    "The hosts whose LIDs a switch forwards out of this port, by its unicast forwarding table (ibroute): a "
    "Slurm host list of the first words of their CAs' node descriptions, empty where none leave. One "
    "series per port of every switch whose table has been read (--fabric.routes-interval-seconds); value "
    "is always 1.",
    (*_F, "destinations"),
)
FABRIC_ROUTES_UP = MetricSpec(
    "ibpool_fabric_switch_routes_scrape_success",
    "gauge",
    "1 if the last read of the switch's forwarding table (ibroute) succeeded, 0 if it failed (the last good "
    "table, if any, is still served); absent when the tables are not read.",
    ("node_guid", "node_desc"),
)
FABRIC_ROUTES_AGE = MetricSpec(
    "ibpool_fabric_switch_routes_age_seconds",
    "gauge",
    "Seconds since the forwarding table served for the switch (ibpool_fabric_port_route_info) was read.",
    ("node_guid", "node_desc"),
)
FABRIC_PORT_COUNTERS_AGE = MetricSpec(
    "ibpool_fabric_port_counters_age_seconds",
    "gauge",
    "Seconds since the port's counters were read (present only for ports read in the last sweep).",
    _F,
)
FABRIC_TOPOLOGY_AGE = MetricSpec(
    "ibpool_fabric_topology_age_seconds",
    "gauge",
    "Seconds since the topology served (links, ports, switches) was discovered; it grows while discovery "
    "fails and the last good topology is used again. Past health.max_age_seconds the fabric collector "
    "serves nothing and fails.",
)
FABRIC_SWEEPS = MetricSpec(
    "ibpool_fabric_sweeps_total",
    "counter",
    "Sweeps ended since start: result complete (published, perhaps with problems) or failed (nothing "
    "published: no topology known).",
    ("result",),
)
FABRIC_SKIPPED_LINES = MetricSpec(
    "ibpool_fabric_skipped_lines_total",
    "counter",
    "Lines of diagnostic output skipped as unparseable or holding a number out of range (never exported), "
    "by program.",
    ("program",),
)
FABRIC_SWEEP_DURATION = MetricSpec(
    "ibpool_fabric_sweep_duration_seconds",
    "gauge",
    "How long the last complete sweep took.",
)
FABRIC_SWEEP_TIMESTAMP = MetricSpec(
    "ibpool_fabric_sweep_timestamp_seconds",
    "gauge",
    "Unix time at the end of the last complete sweep.",
)

# --- VL arbitration weights (docs/architecture.md §5): live from the fabric, desired from OpenSM --
_VL_WEIGHT_HELP = (
    "VL arbitration weight (0-255) per virtual lane and table (high, low; a VL listed twice sums): "
    'source="live" read from a switch port with smpquery vlarb (fabric exporter), source="desired" the '
    "qos_vlarb_high/low the recommender read from OpenSM's configuration."
)
VL_WEIGHT_DESIRED = MetricSpec("ibpool_vl_weight", "gauge", _VL_WEIGHT_HELP, ("table", "vl", "source"))
VL_WEIGHT = MetricSpec("ibpool_vl_weight", "gauge", _VL_WEIGHT_HELP, (*_F, "table", "vl", "source"))

# --- Scheduler (labels pool, node) ----------------------------------------------------------------
POOL_NODE_INFO = MetricSpec(
    "ibpool_pool_node_info",
    "info",
    "A node belongs to a pool (partition); value is always 1.",
    ("pool", "node"),
)
POOL_CAPACITY_GPUS = MetricSpec("ibpool_pool_capacity_gpus", "gauge", "GPUs on the pool's nodes.", ("pool",))
POOL_ALLOCATED_GPUS = MetricSpec(
    "ibpool_pool_allocated_gpus",
    "gauge",
    "GPUs allocated to running jobs in the pool.",
    ("pool",),
)
POOL_PENDING_GPUS = MetricSpec(
    "ibpool_pool_pending_gpus",
    "gauge",
    "GPUs asked for by the pool's pending jobs.",
    ("pool",),
)
POOL_PENDING_JOBS = MetricSpec("ibpool_pool_pending_jobs", "gauge", "Pending jobs in the pool.", ("pool",))
POOL_RUNNING_JOBS = MetricSpec("ibpool_pool_running_jobs", "gauge", "Running jobs in the pool.", ("pool",))
NODE_STATE_INFO = MetricSpec(
    "ibpool_node_state_info",
    "info",
    "A node's scheduler state; value is always 1.",
    ("node", "state"),
)
SCHEDULER_UP = MetricSpec(
    "ibpool_scheduler_up",
    "gauge",
    "1 if the scheduler answered the last poll, 0 if it did not.",
)
SCHEDULER_POLL_TIMESTAMP = MetricSpec(
    "ibpool_scheduler_poll_timestamp_seconds",
    "gauge",
    "Unix time of the last successful poll of the scheduler.",
)

# --- InfluxDB push (exporter/influx) -------------------------------------------------------------
INFLUX_POINTS_WRITTEN = MetricSpec(
    "ibpool_influx_points_written_total", "counter", "Points the InfluxDB server acknowledged."
)
INFLUX_POINTS_RETRIED = MetricSpec(
    "ibpool_influx_points_retried_total",
    "counter",
    "Points in InfluxDB writes that failed and were queued again.",
)
INFLUX_POINTS_REPLAYED = MetricSpec(
    "ibpool_influx_points_replayed_total",
    "counter",
    "Points acknowledged shortly before a failed write and queued again (the server may have lost them).",
)
INFLUX_POINTS_DROPPED = MetricSpec(
    "ibpool_influx_points_dropped_total",
    "counter",
    "Points given up: spill_budget, corrupt_spill, buffer_full (memory full without a usable spill), "
    "rejected by the server, not_finite (NaN/Inf), shutdown (no usable spill).",
    ("reason",),
)
INFLUX_SPILL_CORRUPT_RECORDS = MetricSpec(
    "ibpool_influx_spill_corrupt_records_total",
    "counter",
    "Damaged spill records skipped (a segment cut off by a crash, or a failed checksum).",
)
INFLUX_BUFFER_POINTS = MetricSpec(
    "ibpool_influx_buffer_points", "gauge", "Points waiting in memory, including the batch in flight."
)
INFLUX_SPILL_POINTS = MetricSpec(
    "ibpool_influx_spill_points", "gauge", "Points waiting in spill files on disk."
)
INFLUX_SPILL_BYTES = MetricSpec("ibpool_influx_spill_bytes", "gauge", "Size of the spill files on disk.")
INFLUX_SPILL_DISABLED = MetricSpec(
    "ibpool_influx_spill_disabled",
    "gauge",
    "1 while a spill write failed (full disk, I/O error) and points are kept in memory only until the "
    "disk is tried again; 0 otherwise.",
)
INFLUX_SPILL_ERRORS = MetricSpec(
    "ibpool_influx_spill_errors_total",
    "counter",
    "Spill writes that failed (each undone, nothing left on disk) and sent the buffer to memory only.",
)
INFLUX_LAST_WRITE = MetricSpec(
    "ibpool_influx_last_write_timestamp_seconds",
    "gauge",
    "Unix time of the last successful write to InfluxDB.",
)
