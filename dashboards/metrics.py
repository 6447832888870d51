"""Metric names the dashboards assume beyond exporter/catalog.py, and expressions recording rules replace.

Dashboards query raw metrics. Each `Derived` names the recording rule (`level:metric:operation`) that
will stand for its expression; `USE_RECORDING_RULES = True` switches every panel over once alerts/
defines those rules under these names.
"""

from __future__ import annotations

from dataclasses import dataclass

# Exported by the recommender and the scheduler hooks, not by the exporters (not in the catalog).
EXTERNAL_METRICS: tuple[str, ...] = (
    "ibpool_proposals",  # {state}: proposals per state (recommender)
    "ibpool_changes_applied_total",  # {target,result}: changes the hooks applied or failed to apply
    "ibpool_vl_weight",  # {vl,table="high|low",source="live|desired"}: VL arbitration weights
)
# Series Prometheus itself writes.
BUILTIN_METRICS: tuple[str, ...] = ("ALERTS", "up")

USE_RECORDING_RULES = False

SEL = "{SEL}"


@dataclass(frozen=True)
class Derived:
    """A computed series: the recording rule that will hold it, and the raw PromQL used until then.

    `raw` marks with `{SEL}` where label matchers on the result's labels go.
    """

    rule: str
    raw: str

    def expr(self, matchers: str = "") -> str:
        """The PromQL for this series restricted by `matchers` (e.g. `node=~"$node"`)."""
        if USE_RECORDING_RULES:
            return f"{self.rule}{{{matchers}}}" if matchers else self.rule
        return self.raw.replace(SEL, "{" + matchers + "}")


IB_CONGESTION = Derived(
    "device_port:ibpool_infiniband_congestion_ratio:rate5m",
    f"rate(ibpool_infiniband_port_transmit_wait_total{SEL}[$__rate_interval]) * $tick_bytes"
    f" / ibpool_infiniband_rate_bytes_per_second{SEL}",
)
IB_TX_UTILIZATION = Derived(
    "device_port:ibpool_infiniband_transmit_utilization_ratio:rate5m",
    f"rate(ibpool_infiniband_port_data_transmitted_bytes_total{SEL}[$__rate_interval])"
    f" / ibpool_infiniband_rate_bytes_per_second{SEL}",
)
FABRIC_CONGESTION = Derived(
    "port:ibpool_fabric_port_congestion_ratio:rate5m",
    f"rate(ibpool_fabric_port_transmit_wait_total{SEL}[$__rate_interval]) * $tick_bytes"
    f" / ibpool_fabric_port_rate_bytes_per_second{SEL}",
)
FABRIC_TX_UTILIZATION = Derived(
    "port:ibpool_fabric_port_transmit_utilization_ratio:rate5m",
    f"rate(ibpool_fabric_port_data_transmitted_bytes_total{SEL}[$__rate_interval])"
    f" / ibpool_fabric_port_rate_bytes_per_second{SEL}",
)
POOL_GPU_UTILIZATION = Derived(
    "pool:ibpool_gpu_utilization_ratio:avg",
    "avg by (pool) (ibpool_gpu_utilization_ratio"
    f" * on (node) group_left (pool) max by (node, pool) (ibpool_pool_node_info{SEL}))",
)
POOL_IDLE_GPUS = Derived(
    "pool:ibpool_pool_idle_gpus:sum",
    f"sum by (pool) (ibpool_pool_capacity_gpus{SEL}) - sum by (pool) (ibpool_pool_allocated_gpus{SEL})",
)
POOL_ALLOCATION = Derived(
    "pool:ibpool_pool_allocated_ratio:sum",
    f"sum by (pool) (ibpool_pool_allocated_gpus{SEL}) / sum by (pool) (ibpool_pool_capacity_gpus{SEL})",
)

DERIVED: tuple[Derived, ...] = (
    IB_CONGESTION,
    IB_TX_UTILIZATION,
    FABRIC_CONGESTION,
    FABRIC_TX_UTILIZATION,
    POOL_GPU_UTILIZATION,
    POOL_IDLE_GPUS,
    POOL_ALLOCATION,
)
RECORDING_RULES_USED: tuple[str, ...] = tuple(d.rule for d in DERIVED)
