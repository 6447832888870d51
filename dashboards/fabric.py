"""Fabric: every switch port seen from the management host (perfquery sweeps)."""

from __future__ import annotations

from typing import Any

from dashboards import metrics, node
from dashboards.base import dashboard
from dashboards.layout import Row
from dashboards.links import row_link
from dashboards.metrics import (
    FABRIC_CONGESTION,
    FABRIC_TX_UTILIZATION,
    FABRIC_VL_CONGESTION,
    FABRIC_WAIT_SATURATED,
)
from dashboards.panels import Q, heatmap, stat, state_timeline, table, timeseries, value_mapping
from dashboards.variables import label_values, tick_bytes

UID = "ibpool-fabric"
SWITCHES = 'node_desc=~"$switch"'
# A host's HCA describes itself as "<host> <device>" (the driver's default node description): the host
# name is the `node` of the node dashboard.
HOST_PORTS = (
    f'label_replace(ibpool_fabric_link_info{{{SWITCHES}, remote_desc=~"[^ ]+ .+"}},'
    ' "node", "$1", "remote_desc", "([^ ]+) .+")'
)
PORT = "{{node_desc}}:{{port}}"
FABRIC_ERRORS = (
    ("symbol_error_total", "symbol errors"),
    ("link_error_recovery_total", "link error recovery"),
    ("link_downed_total", "link downed"),
    ("local_link_integrity_errors_total", "local link integrity"),
    ("errors_received_total", "receive errors"),
    ("receive_remote_physical_errors_total", "remote physical errors"),
    ("discards_transmitted_total", "transmit discards"),
    ("excessive_buffer_overrun_errors_total", "buffer overrun"),
)


def _port_rate(metric: str, legend: str, fn: str = "rate") -> Q:
    return Q(f"{fn}(ibpool_fabric_port_{metric}{{{SWITCHES}}}[$__rate_interval])", legend)


def _sweep() -> Row:
    up = value_mapping({0: ("down", "red"), 1: ("up", "green")})
    return Row(
        "Sweep",
        [
            stat(
                "Last sweep age",
                [Q("time() - max(ibpool_fabric_sweep_timestamp_seconds)")],
                "s",
                no_value="never",
            ),
            stat("Sweep duration", [Q("max(ibpool_fabric_sweep_duration_seconds)")], "s"),
            stat(
                "Topology age",
                [Q("max(ibpool_fabric_topology_age_seconds)")],
                "s",
                "Since the fabric was last discovered; grows while discovery fails (alert above 2 minutes).",
                no_value="never",
                thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 120}],
            ),
            stat(
                "Switches down",
                [Q(f"count(ibpool_fabric_switch_up{{{SWITCHES}}} == 0)")],
                "none",
                thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
            ),
            state_timeline("Switch up", [Q(f"ibpool_fabric_switch_up{{{SWITCHES}}}", "{{node_desc}}")], up),
        ],
        height=5,
        widths=(4, 4, 4, 4, 8),
    )


def _throughput() -> Row:
    return Row(
        "Throughput",
        [
            timeseries(
                "Link utilization (transmit / rate)",
                [Q(FABRIC_TX_UTILIZATION.expr(SWITCHES), PORT)],
                "percentunit",
                max_value=1,
            ),
            timeseries(
                "Throughput against link rate",
                [
                    _port_rate("data_transmitted_bytes_total", PORT + " tx"),
                    Q(f"ibpool_fabric_port_rate_bytes_per_second{{{SWITCHES}}}", PORT + " link rate"),
                ],
                "Bps",
            ),
        ],
        height=9,
    )


def _congestion() -> Row:
    congestion = FABRIC_CONGESTION.expr(SWITCHES)
    saturated = Q(FABRIC_WAIT_SATURATED.expr(SWITCHES), PORT + " wait counter SATURATED")
    return Row(
        "Congestion",
        [
            heatmap(
                "Congestion by switch and port",
                [Q(congestion, PORT)],
                "percentunit",
                f"Transmit-wait ratio ({metrics.congestion_formula()}), one row per switch port.",
            ),
            timeseries(
                "Most congested ports",
                [Q(f"topk(10, {congestion})", PORT), saturated],
                "percentunit",
                "A saturated 32-bit wait counter shows as 1 (unknown, not idle).",
            ),
            timeseries(
                "Transmit wait per VL",
                [
                    Q(
                        f"max by (node_desc, port, vl) ({FABRIC_VL_CONGESTION.expr(SWITCHES)}) > 0",
                        PORT + " VL{{vl}}",
                    )
                ],
                "percentunit",
                "Share of time each virtual lane had data it could not send: which traffic class waits.",
            ),
        ],
        height=10,
    )


def _health() -> Row:
    errors = [_port_rate(metric, f"{PORT} {name}", "increase") for metric, name in FABRIC_ERRORS]
    states = value_mapping(
        {1: ("down", "red"), 2: ("init", "orange"), 3: ("armed", "yellow"), 4: ("active", "green")}
    )
    return Row(
        "Errors and state",
        [
            timeseries("Port errors", [Q(q.expr + " > 0", q.legend) for q in errors], "none", bars=True),
            state_timeline(
                "Ports not active", [Q(f"ibpool_fabric_port_state_id{{{SWITCHES}}} != 4", PORT)], states
            ),
            table(
                "Ports not read in the last sweep",
                [Q(f"ibpool_fabric_port_scrape_success{{{SWITCHES}}} == 0")],
                hide=("Time", "__name__", "instance", "job", "Value"),
            ),
        ],
        height=9,
    )


def _topology() -> Row:
    return Row(
        "Topology",
        [
            table(
                "Links",
                [Q(f"ibpool_fabric_link_info{{{SWITCHES}}}")],
                "Every cable between two ports, as the last sweep saw it.",
                hide=("Time", "__name__", "instance", "job", "Value"),
                rename={
                    "node_desc": "switch",
                    "port": "port",
                    "remote_desc": "remote",
                    "remote_port": "remote port",
                },
            ),
            row_link(
                table(
                    "Host ports",
                    [Q(HOST_PORTS)],
                    "Switch ports cabled to a host's HCA; a row opens that host's node dashboard.",
                    hide=("Time", "__name__", "instance", "job", "Value", "node_guid", "remote_guid"),
                    rename={"node_desc": "switch", "remote_desc": "HCA", "remote_port": "HCA port"},
                ),
                node.UID,
                "node",
                "node",
                "Node",
            ),
        ],
        height=12,
        widths=(14, 10),
    )


def build() -> Any:
    """The fabric dashboard."""
    return dashboard(
        UID,
        "ibpool / Fabric",
        "Switch ports from the fabric sweep: throughput against rate, congestion, VL waits, errors, links.",
        [_sweep(), _throughput(), _congestion(), _health(), _topology()],
        variables=[
            label_values("switch", "ibpool_fabric_switch_up", "node_desc", title="Switch"),
            *([] if metrics.USE_RECORDING_RULES else [tick_bytes()]),
        ],
    )
