"""The PromQL the Prometheus source runs: recording rules of alerts/recording_rules.yml, and raw series."""

from __future__ import annotations

POOL_CAPACITY = "sum by (pool) (ibpool_pool_capacity_gpus)"
POOL_ALLOCATED = "sum by (pool) (ibpool_pool_allocated_gpus)"
POOL_PENDING = "pool:ibpool_pool_pending_gpus:sum"
POOL_UTILIZATION = "pool:ibpool_gpu_utilization_ratio:avg"
POOL_IDLE_GPUS = "pool:ibpool_pool_idle_gpus:sum"
POOL_NODES = "max by (pool, node) (ibpool_pool_node_info) == 1"
NODE_STATE = "max by (node, state) (ibpool_node_state_info) == 1"
NODE_UTILIZATION = "avg by (node) (ibpool_gpu_utilization_ratio)"
SCHEDULER_AGE = (
    "time() - max(ibpool_scheduler_poll_timestamp_seconds) and on () (max(ibpool_scheduler_up) == 1)"
)
NODE_AGE = "max(time() - max by (node) (timestamp(ibpool_gpu_up)))"
FABRIC_AGE = "time() - max(ibpool_fabric_sweep_timestamp_seconds)"

HCA_LABELS = "node, device, port"
HCA_CONGESTION = f"max by ({HCA_LABELS}) (port:ibpool_infiniband_congestion:ratio_rate5m)"
HCA_UTILIZATION = f"max by ({HCA_LABELS}) (port:ibpool_infiniband_transmit_utilization:ratio_rate5m)"
HCA_SATURATED = f"max by ({HCA_LABELS}) (port:ibpool_infiniband_transmit_wait_saturated:max)"
HCA_RATE = f"max by ({HCA_LABELS}) (ibpool_infiniband_rate_bytes_per_second)"

FABRIC_LABELS = "node_guid, port, node_desc"
FABRIC_CONGESTION = f"max by ({FABRIC_LABELS}) (fabric_port:ibpool_fabric_port_congestion:ratio_rate5m)"
FABRIC_UTILIZATION = (
    f"max by ({FABRIC_LABELS}) (fabric_port:ibpool_fabric_port_transmit_utilization:ratio_rate5m)"
)
FABRIC_SATURATED = f"max by ({FABRIC_LABELS}) (fabric_port:ibpool_fabric_port_transmit_wait_saturated:max)"
FABRIC_VL_CONGESTION = (
    f"max by ({FABRIC_LABELS}, vl) (fabric_port_vl:ibpool_fabric_port_vl_congestion:ratio_rate5m)"
)
FABRIC_RATE = f"max by ({FABRIC_LABELS}) (ibpool_fabric_port_rate_bytes_per_second)"
FABRIC_LINKS = (
    "max by (node_guid, port, node_desc, remote_guid, remote_port, remote_desc) (ibpool_fabric_link_info)"
)
SWITCHES = "max by (node_guid) (ibpool_fabric_switch_up)"
FABRIC_ROUTES = "max by (node_guid, port, destinations) (ibpool_fabric_port_route_info)"
