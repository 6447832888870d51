"""Node: every GPU and every InfiniBand port of one node."""

from __future__ import annotations

from typing import Any

from dashboards import metrics
from dashboards.base import dashboard
from dashboards.layout import Row
from dashboards.metrics import IB_CONGESTION, IB_TX_UTILIZATION, IB_WAIT_SATURATED, ib_counter, ib_gauge
from dashboards.panels import Q, stat, state_timeline, table, timeseries, value_mapping
from dashboards.variables import label_values, tick_bytes

UID = "ibpool-node"
GPUS = 'node=~"$node", gpu=~"$gpu"'
PORTS = 'node=~"$node", device=~"$device"'
GPU = "GPU {{gpu}}"
PORT = "{{device}}/{{port}}"

IB_STATES = {
    1: ("down", "red"),
    2: ("init", "orange"),
    3: ("armed", "yellow"),
    4: ("active", "green"),
    5: ("act defer", "blue"),
}
IB_PHYSICAL_STATES = {
    1: ("sleep", "purple"),
    2: ("polling", "orange"),
    3: ("disabled", "red"),
    4: ("training", "yellow"),
    5: ("link up", "green"),
    6: ("error recovery", "red"),
    7: ("phy test", "blue"),
}
IB_ERRORS = (
    ("symbol_error_total", "symbol errors"),
    ("link_error_recovery_total", "link error recovery"),
    ("link_downed_total", "link downed"),
    ("local_link_integrity_errors_total", "local link integrity"),
    ("port_errors_received_total", "receive errors"),
    ("port_receive_remote_physical_errors_total", "remote physical errors"),
    ("port_discards_transmitted_total", "transmit discards"),
    ("excessive_buffer_overrun_errors_total", "buffer overrun"),
)


def _gpu(metric: str, legend: str = GPU) -> Q:
    return Q(f"ibpool_gpu_{metric}{{{GPUS}}}", legend)


def _gpu_rows() -> list[Row]:
    up = value_mapping({0: ("lost", "red"), 1: ("up", "green")})
    return [
        Row(
            "GPUs",
            [
                state_timeline("GPU up", [_gpu("up")], up, "0 when the GPU stopped answering NVML."),
                timeseries("Utilization", [_gpu("utilization_ratio")], "percentunit", max_value=1),
                timeseries(
                    "SM and tensor active",
                    [_gpu("sm_active_ratio", GPU + " SM"), _gpu("tensor_active_ratio", GPU + " tensor")],
                    "percentunit",
                    "GPM metrics (Hopper and newer).",
                    max_value=1,
                ),
            ],
        ),
        Row(
            "GPU memory, power, heat",
            [
                timeseries(
                    "Memory used",
                    [
                        _gpu("memory_used_bytes"),
                        _gpu("memory_total_bytes", GPU + " total"),
                        _gpu("memory_reserved_bytes", GPU + " reserved by the driver"),
                    ],
                    "bytes",
                    "Used as nvidia-smi shows it (nvmlDeviceGetMemoryInfo_v2: the driver's reserve apart); "
                    "a GPU whose driver lacks v2 reports v1, reserve included (GPU sampling row).",
                ),
                timeseries(
                    "Memory bandwidth utilization",
                    [_gpu("memory_bandwidth_utilization_ratio")],
                    "percentunit",
                    max_value=1,
                ),
                timeseries(
                    "Power",
                    [
                        _gpu("power_watts"),
                        _gpu("power_limit_watts", GPU + " limit"),
                        Q(
                            f"rate(ibpool_gpu_energy_joules_total{{{GPUS}}}[$__rate_interval])",
                            GPU + " from energy",
                        ),
                    ],
                    "watt",
                    "Instant power, the limit, and the mean power from the energy counter (read every "
                    "--gpu.slow-sample-interval-seconds: it costs 3.4 ms on an H200).",
                ),
                timeseries(
                    "Temperature",
                    [
                        _gpu("temperature_celsius", GPU + " core"),
                        _gpu("memory_temperature_celsius", GPU + " HBM"),
                    ],
                    "celsius",
                ),
            ],
        ),
        Row(
            "GPU health",
            [
                timeseries(
                    "Throttle reasons active",
                    [
                        Q(
                            f"max by (gpu, reason) (ibpool_gpu_throttle_active{{{GPUS}}}) > 0",
                            GPU + " {{reason}}",
                        )
                    ],
                    "none",
                    bars=True,
                ),
                timeseries(
                    "Clocks",
                    [_gpu("sm_clock_hertz", GPU + " SM"), _gpu("memory_clock_hertz", GPU + " memory")],
                    "hertz",
                ),
                timeseries(
                    "Clocks held back (share of time)",
                    [
                        Q(
                            f"rate(ibpool_gpu_clock_event_violation_seconds_total{{{GPUS}}}"
                            "[$__rate_interval]) > 0",
                            GPU + " {{reason}}",
                        )
                    ],
                    "percentunit",
                    "Clock-event violation time (nvmlDeviceGetViolationStatus; DCGM_FI_DEV_*_VIOLATION): the "
                    "share of time clocks were held below target by power, thermal, sync boost, board limit, "
                    "low utilization or reliability. Idle GPUs show low_utilization.",
                    max_value=1,
                ),
                timeseries(
                    "XID errors",
                    [
                        Q(
                            f"increase(ibpool_gpu_xid_errors_total{{{GPUS}}}[$__rate_interval]) > 0",
                            GPU + " XID {{xid}}",
                        )
                    ],
                    "none",
                    bars=True,
                ),
                timeseries(
                    "ECC errors",
                    [
                        Q(
                            f"increase(ibpool_gpu_ecc_errors_total{{{GPUS}}}[$__rate_interval])",
                            GPU + " {{type}}",
                        )
                    ],
                    "none",
                    bars=True,
                ),
            ],
        ),
        Row(
            "GPU interconnect and jobs",
            [
                timeseries(
                    "NVLink throughput",
                    [
                        Q(
                            f"sum by (gpu) (rate(ibpool_gpu_nvlink_data_transmitted_bytes_total{{{GPUS}}}"
                            "[$__rate_interval]))",
                            GPU + " tx",
                        ),
                        Q(
                            f"sum by (gpu) (rate(ibpool_gpu_nvlink_data_received_bytes_total{{{GPUS}}}"
                            "[$__rate_interval]))",
                            GPU + " rx",
                        ),
                    ],
                    "Bps",
                ),
                timeseries(
                    "NVLink errors",
                    [
                        Q(
                            f"sum by (gpu, type) (increase(ibpool_gpu_nvlink_errors_total{{{GPUS}}}"
                            "[$__rate_interval]))",
                            GPU + " {{type}}",
                        )
                    ],
                    "none",
                    "CRC, replay and recovery errors summed over the GPU's links (per link in the metric).",
                    bars=True,
                ),
                timeseries(
                    "PCIe throughput",
                    [
                        Q(
                            f"ibpool_gpu_pcie_throughput_bytes_per_second{{{GPUS}}}",
                            GPU + " {{direction}}",
                        )
                    ],
                    "Bps",
                    "The driver's ~20 ms sample at each slow read (--gpu.slow-sample-interval-seconds).",
                ),
                timeseries(
                    "PCIe link",
                    [_gpu("pcie_link_generation", GPU + " gen"), _gpu("pcie_link_width", GPU + " lanes")],
                    "none",
                    "A link that trained below gen 5 x16 (on H100/H200) loses host bandwidth.",
                ),
                timeseries(
                    "PCIe replays",
                    [Q(f"increase(ibpool_gpu_pcie_replay_errors_total{{{GPUS}}}[$__rate_interval])")],
                    "none",
                    bars=True,
                ),
                table(
                    "Jobs on this node's GPUs",
                    [Q(f"ibpool_gpu_job_info{{{GPUS}}}")],
                    "The exporter's `job` label becomes `exported_job` under Prometheus's own `job` label.",
                    hide=("Time", "__name__", "instance", "job", "Value"),
                    rename={"exported_job": "scheduler job"},
                ),
            ],
        ),
    ]


def _gpu_reliability_and_mig_rows() -> list[Row]:
    remap = value_mapping({0: ("ok", "green"), 1: ("yes", "red")})
    mig = value_mapping({0: ("off", "text"), 1: ("MIG", "blue")})
    return [
        Row(
            "GPU memory reliability",
            [
                timeseries(
                    "Remapped rows",
                    [_gpu("remapped_rows_total", GPU + " {{type}}")],
                    "none",
                    "Rows remapped after ECC errors (kept across reboots). An uncorrectable one waits for a "
                    "reset.",
                ),
                state_timeline(
                    "Row remap pending or failed",
                    [_gpu("row_remap_pending", GPU + " pending"), _gpu("row_remap_failure", GPU + " failed")],
                    remap,
                    "Pending: reset the GPU when its jobs allow. Failed: no spare row left, the GPU needs "
                    "service.",
                ),
                timeseries(
                    "Retired pages",
                    [
                        _gpu("retired_pages_total", GPU + " {{cause}}"),
                        _gpu("retired_pages_pending", GPU + " pending"),
                    ],
                    "none",
                    "GPUs without row remapping (before Ampere) retire pages instead.",
                ),
            ],
        ),
        Row(
            "MIG",
            [
                state_timeline("MIG mode", [_gpu("mig_enabled")], mig),
                table(
                    "MIG instances",
                    [Q(f"ibpool_gpu_mig_instance_info{{{GPUS}}}")],
                    hide=("Time", "__name__", "instance", "job", "Value"),
                ),
                timeseries(
                    "MIG utilization",
                    [_gpu("mig_utilization_ratio", GPU + " GI {{gpu_instance}}")],
                    "percentunit",
                    "Graphics engine activity of each GPU instance (GPM; DCGM_FI_PROF_GR_ENGINE_ACTIVE). A "
                    "GPU in MIG mode has no utilization of its own.",
                    max_value=1,
                ),
                timeseries(
                    "MIG memory",
                    [
                        _gpu("mig_memory_used_bytes", GPU + " GI {{gpu_instance}}"),
                        _gpu("mig_memory_total_bytes", GPU + " GI {{gpu_instance}} total"),
                    ],
                    "bytes",
                ),
            ],
        ),
        Row(
            "GPU sampling",
            [
                timeseries(
                    "Sample age",
                    [_gpu("sample_age_seconds")],
                    "s",
                    "How old the values served are: the GPUs are read in the background every "
                    "--gpu.sample-interval-seconds.",
                ),
                state_timeline(
                    "Stale GPUs",
                    [_gpu("sample_stale")],
                    value_mapping({0: ("fresh", "green"), 1: ("stale", "red")}),
                    "A GPU whose NVML read is stuck beyond --gpu.deadline-seconds: its values are left out.",
                ),
                timeseries(
                    "NVML time per second",
                    [Q(f"rate(ibpool_gpu_nvml_read_seconds_total{{{GPUS}}}[$__rate_interval])", GPU)],
                    "percentunit",
                    "Share of time the exporter spends in NVML reads of each GPU (the driver's cost of "
                    "watching).",
                ),
                table(
                    "GPUs",
                    [Q(f"ibpool_gpu_info{{{GPUS}}}")],
                    hide=("Time", "__name__", "instance", "job", "Value"),
                ),
                state_timeline(
                    "Memory accounting",
                    [_gpu("memory_info_version")],
                    value_mapping(
                        {1: ("v1: used includes the reserve", "orange"), 2: ("v2: as nvidia-smi", "green")}
                    ),
                ),
            ],
        ),
    ]


def _port_rows() -> list[Row]:
    # Counters, rate and state from ibpool or, beside node_exporter, from node_infiniband_* (metrics.py).
    def ib(metric: str, legend: str = PORT) -> Q:
        return Q(ib_gauge(metric, PORTS), legend)

    def ib_rate(metric: str, legend: str, fn: str = "rate") -> Q:
        return Q(ib_counter(fn, metric, PORTS), legend)

    saturated = Q(IB_WAIT_SATURATED.expr(PORTS), PORT + " wait counter SATURATED")
    errors = [ib_rate(metric, f"{PORT} {name}", "increase") for metric, name in IB_ERRORS]
    return [
        Row(
            "InfiniBand ports",
            [
                timeseries(
                    "Throughput against link rate",
                    [
                        ib_rate("port_data_transmitted_bytes_total", PORT + " tx"),
                        ib_rate("port_data_received_bytes_total", PORT + " rx"),
                        ib("rate_bytes_per_second", PORT + " link rate"),
                    ],
                    "Bps",
                ),
                timeseries(
                    "Transmit utilization",
                    [Q(IB_TX_UTILIZATION.expr(PORTS), PORT)],
                    "percentunit",
                    max_value=1,
                ),
                timeseries(
                    "Transmit wait (congestion)",
                    [Q(IB_CONGESTION.expr(PORTS), PORT), saturated],
                    "percentunit",
                    f"Share of time data waited to be sent: {metrics.congestion_formula()}. "
                    "A saturated 32-bit wait counter shows as 1 (unknown, not idle).",
                ),
            ],
        ),
        Row(
            "InfiniBand port health",
            [
                timeseries("Errors", [Q(q.expr + " > 0", q.legend) for q in errors], "none", bars=True),
                state_timeline("Port state", [ib("state_id")], value_mapping(IB_STATES)),
                state_timeline(
                    "Physical state", [ib("physical_state_id")], value_mapping(IB_PHYSICAL_STATES)
                ),
                table(
                    "Ports",
                    [Q(f"ibpool_infiniband_port_info{{{PORTS}}}")],
                    hide=("Time", "__name__", "instance", "job", "Value", "node_guid", "port_guid"),
                ),
            ],
        ),
    ]


def _exporter_rows() -> list[Row]:
    node = 'node=~"$node"'
    return [
        Row(
            "Exporter",
            [
                stat(
                    "Collectors failing",
                    [Q(f"count(ibpool_exporter_collector_success{{{node}}} == 0)")],
                    "none",
                    thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
                ),
                timeseries(
                    "Collector duration",
                    [Q(f"ibpool_exporter_collector_duration_seconds{{{node}}}", "{{collector}}")],
                    "s",
                ),
                timeseries(
                    "Scrape duration",
                    [
                        Q(
                            f"rate(ibpool_exporter_scrape_duration_seconds_total{{{node}}}[$__rate_interval])"
                            f" / rate(ibpool_exporter_scrapes_total{{{node}}}[$__rate_interval])",
                            "mean",
                        ),
                        Q(f"ibpool_exporter_last_scrape_duration_seconds{{{node}}}", "last"),
                    ],
                    "s",
                    "Time the exporter takes to answer /metrics (collect and render).",
                ),
            ],
            height=6,
            widths=(4, 10, 10),
        ),
        Row(
            "Exporter process",
            [
                timeseries(
                    "CPU",
                    [Q(f"rate(process_cpu_seconds_total{{{node}}}[$__rate_interval])", "{{job}}")],
                    "percentunit",
                ),
                timeseries(
                    "Resident memory", [Q(f"process_resident_memory_bytes{{{node}}}", "{{job}}")], "bytes"
                ),
                timeseries(
                    "Open files",
                    [
                        Q(f"process_open_fds{{{node}}}", "{{job}} open"),
                        Q(f"process_max_fds{{{node}}}", "{{job}} limit"),
                    ],
                    "none",
                ),
                stat("Up since", [Q(f"max(process_start_time_seconds{{{node}}}) * 1000")], "dateTimeFromNow"),
            ],
            height=6,
            widths=(7, 7, 6, 4),
        ),
    ]


def build() -> Any:
    """The node dashboard."""
    return dashboard(
        UID,
        "ibpool / Node",
        "Every GPU (NVML) and every InfiniBand port (sysfs) of one node.",
        [*_gpu_rows(), *_gpu_reliability_and_mig_rows(), *_port_rows(), *_exporter_rows()],
        variables=[
            label_values("node", "ibpool_gpu_up", "node", title="Node", multi=False),
            label_values("gpu", 'ibpool_gpu_up{node=~"$node"}', "gpu", title="GPU"),
            label_values("device", 'ibpool_infiniband_port_info{node=~"$node"}', "device", title="IB device"),
            *([] if metrics.USE_RECORDING_RULES else [tick_bytes()]),
        ],
    )
