"""Metric names the dashboards assume beyond exporter/catalog.py, and the recording rules they read.

Dashboards query the catalog's metrics, the external ones below and the recording rules of
alerts/recording_rules.yml. Each `Derived` names the recording rule (`level:metric:operation`) that holds a
computed series and the raw PromQL it stands for; `USE_RECORDING_RULES` picks which one the panels use
(True: the rules, which Prometheus must load; False: raw PromQL that works without them). A `Derived`
without a rule (`rule=None`) is always raw. tests/dashboards checks every rule named here against
alerts/recording_rules.yml and every external metric against alerts/external/metrics.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

# Exported by the recommender and the scheduler hooks, not by the exporters (not in the catalog); the same
# names, labels and producers are listed in alerts/external/metrics.yaml.
EXTERNAL_METRICS: tuple[str, ...] = (
    "ibpool_proposals",  # {state}: proposals per state (recommender)
    "ibpool_proposal_oldest_pending_timestamp_seconds",  # {kind}: created_at of the oldest pending one
    "ibpool_changes_applied_total",  # {target="opensm|slurm",result="applied|failed|rolled_back"} (hooks)
)
# Series Prometheus itself writes.
BUILTIN_METRICS: tuple[str, ...] = ("ALERTS", "up")
# node_exporter's infiniband families the node dashboard reads where ibpool runs without its mirror
# (--no-collector.infiniband.mirror): the twins of ibpool_infiniband_*, same labels and values.
NODE_EXPORTER_PREFIX = "node_infiniband_"


def ib_gauge(name: str, matchers: str) -> str:
    """A node port's gauge `ibpool_infiniband_<name>`, else node_exporter's twin (ibpool's wins)."""
    ours, theirs = f"ibpool_infiniband_{name}{{{matchers}}}", f"{NODE_EXPORTER_PREFIX}{name}{{{matchers}}}"
    return f"({ours} or ({theirs} unless on (instance, device, port) {ours}))"


def ib_counter(function: str, name: str, matchers: str) -> str:
    """`function(counter[$__rate_interval])` of a node port's counter from either source (ibpool's wins)."""
    ours, theirs = f"ibpool_infiniband_{name}{{{matchers}}}", f"{NODE_EXPORTER_PREFIX}{name}{{{matchers}}}"
    window = "[$__rate_interval]"
    theirs_only = f"{function}({theirs}{window}) unless on (instance, device, port) {ours}"
    return f"({function}({ours}{window}) or ({theirs_only}))"


USE_RECORDING_RULES = True

SEL = "{SEL}"


@dataclass(frozen=True)
class Derived:
    """A computed series: the recording rule that holds it (None: no rule), and the raw PromQL for it.

    `raw` marks with `{SEL}` where label matchers on the result's labels go; `raw_matchers` are matchers
    the raw form always adds there (the rule already applies them).
    """

    rule: str | None
    raw: str
    raw_matchers: str = ""

    def expr(self, matchers: str = "") -> str:
        """The PromQL for this series restricted by `matchers` (e.g. `node=~"$node"`)."""
        if USE_RECORDING_RULES and self.rule is not None:
            return f"{self.rule}{{{matchers}}}" if matchers else self.rule
        selected = ", ".join(m for m in (self.raw_matchers, matchers) if m)
        return self.raw.replace(SEL, "{" + selected + "}")


def congestion_formula() -> str:
    """How the congestion panels compute the transmit-wait ratio, for their descriptions."""
    if USE_RECORDING_RULES:
        return "rate(wait ticks[5m]) x bytes per tick (per HCA model, alerts/recording_rules.yml) / link rate"
    return "wait ticks x $tick_bytes / link rate"


# ---- node-side InfiniBand ports (labels node, instance, job, device, port) -------------------------------
IB_CONGESTION = Derived(
    "port:ibpool_infiniband_congestion:ratio_rate5m",
    f"rate(ibpool_infiniband_port_transmit_wait_total{SEL}[$__rate_interval]) * $tick_bytes"
    f" / ibpool_infiniband_rate_bytes_per_second{SEL}",
)
IB_TX_UTILIZATION = Derived(
    "port:ibpool_infiniband_transmit_utilization:ratio_rate5m",
    f"rate(ibpool_infiniband_port_data_transmitted_bytes_total{SEL}[$__rate_interval])"
    f" / ibpool_infiniband_rate_bytes_per_second{SEL}",
)
IB_WAIT_SATURATED = Derived(
    "port:ibpool_infiniband_transmit_wait_saturated:max",
    f"ibpool_infiniband_counter_saturated{SEL} == 1",
    raw_matchers='counter="port_xmit_wait"',
)

# ---- switch ports from the fabric sweep (labels instance, job, node_guid, port, node_desc) --------------
FABRIC_CONGESTION = Derived(
    "fabric_port:ibpool_fabric_port_congestion:ratio_rate5m",
    f"rate(ibpool_fabric_port_transmit_wait_total{SEL}[$__rate_interval]) * $tick_bytes"
    f" / ibpool_fabric_port_rate_bytes_per_second{SEL}",
)
FABRIC_VL_CONGESTION = Derived(
    "fabric_port_vl:ibpool_fabric_port_vl_congestion:ratio_rate5m",
    f"rate(ibpool_fabric_port_vl_transmit_wait_total{SEL}[$__rate_interval]) * $tick_bytes"
    f" / on (instance, job, node_guid, port) group_left () ibpool_fabric_port_rate_bytes_per_second{SEL}",
)
FABRIC_TX_UTILIZATION = Derived(
    "fabric_port:ibpool_fabric_port_transmit_utilization:ratio_rate5m",
    f"rate(ibpool_fabric_port_data_transmitted_bytes_total{SEL}[$__rate_interval])"
    f" / ibpool_fabric_port_rate_bytes_per_second{SEL}",
)
FABRIC_WAIT_SATURATED = Derived(
    "fabric_port:ibpool_fabric_port_transmit_wait_saturated:max",
    f"ibpool_fabric_port_counter_saturated{SEL} == 1",
    raw_matchers='counter="port_xmit_wait"',
)

# ---- pools (label pool) -----------------------------------------------------------------------------------
POOL_GPU_UTILIZATION = Derived(
    "pool:ibpool_gpu_utilization_ratio:avg",
    "avg by (pool) (ibpool_gpu_utilization_ratio"
    f" * on (node) group_left (pool) max by (node, pool) (ibpool_pool_node_info{SEL}))",
)
POOL_IDLE_GPUS = Derived(
    "pool:ibpool_pool_idle_gpus:sum",
    f"sum by (pool) (clamp_min(ibpool_pool_capacity_gpus{SEL} - ibpool_pool_allocated_gpus{SEL}, 0))",
)
POOL_PENDING_GPUS = Derived(
    "pool:ibpool_pool_pending_gpus:sum",
    f"sum by (pool) (ibpool_pool_pending_gpus{SEL})",
)
# No recording rule: allocated / capacity is cheap and used by the dashboards only.
POOL_ALLOCATION = Derived(
    None,
    f"sum by (pool) (ibpool_pool_allocated_gpus{SEL}) / sum by (pool) (ibpool_pool_capacity_gpus{SEL})",
)

DERIVED: tuple[Derived, ...] = (
    IB_CONGESTION,
    IB_TX_UTILIZATION,
    IB_WAIT_SATURATED,
    FABRIC_CONGESTION,
    FABRIC_VL_CONGESTION,
    FABRIC_TX_UTILIZATION,
    FABRIC_WAIT_SATURATED,
    POOL_GPU_UTILIZATION,
    POOL_IDLE_GPUS,
    POOL_PENDING_GPUS,
    POOL_ALLOCATION,
)
RECORDING_RULES_USED: tuple[str, ...] = tuple(d.rule for d in DERIVED if d.rule is not None)
