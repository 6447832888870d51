"""Fleet overview: GPUs per pool, allocation and utilization, idle against pending, firing alerts."""

from __future__ import annotations

from typing import Any

from dashboards import pool
from dashboards.base import dashboard
from dashboards.layout import Row
from dashboards.links import row_link, series_link
from dashboards.metrics import POOL_ALLOCATION, POOL_GPU_UTILIZATION, POOL_IDLE_GPUS, POOL_PENDING_GPUS
from dashboards.panels import Q, stat, table, timeseries
from dashboards.variables import label_values

UID = "ibpool-fleet"
POOLS = 'pool=~"$pool"'
FIRING = 'ALERTS{alertstate="firing"}'


def _totals() -> Row:
    return Row(
        "Fleet",
        [
            stat("GPUs", [Q(f"sum(ibpool_pool_capacity_gpus{{{POOLS}}})")], "none"),
            stat("Allocated", [Q(f"sum(ibpool_pool_allocated_gpus{{{POOLS}}})")], "none"),
            stat("Idle", [Q(f"sum({POOL_IDLE_GPUS.expr(POOLS)})")], "none"),
            stat("Pending GPUs", [Q(f"sum({POOL_PENDING_GPUS.expr(POOLS)})")], "none"),
            stat(
                "GPUs lost",
                [Q("count(ibpool_gpu_up == 0)")],
                "none",
                "GPUs that stopped answering NVML.",
                thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
            ),
            stat(
                "Firing alerts",
                [Q(f"count({FIRING})")],
                "none",
                thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
            ),
        ],
        height=4,
    )


def _to_pool(panel: Any) -> Any:
    return series_link(panel, pool.UID, "pool", "pool", "Pool")


def _pools() -> Row:
    return Row(
        "Pools",
        [
            _to_pool(
                timeseries(
                    "GPUs per pool",
                    [Q(f"sum by (pool) (ibpool_pool_capacity_gpus{{{POOLS}}})", "{{pool}}")],
                    "none",
                    stack=True,
                )
            ),
            _to_pool(
                timeseries(
                    "Allocation (allocated / capacity)",
                    [Q(POOL_ALLOCATION.expr(POOLS), "{{pool}}")],
                    "percentunit",
                    max_value=1,
                )
            ),
            _to_pool(
                timeseries(
                    "GPU utilization (pool's nodes)",
                    [Q(POOL_GPU_UTILIZATION.expr(POOLS), "{{pool}}")],
                    "percentunit",
                    "Mean utilization of every GPU on the pool's nodes, busy or idle.",
                    max_value=1,
                )
            ),
        ],
        height=9,
    )


def _balance() -> Row:
    idle = Q(POOL_IDLE_GPUS.expr(POOLS), "{{pool}} idle")
    pending = Q(POOL_PENDING_GPUS.expr(POOLS), "{{pool}} pending")
    return Row(
        "Idle against pending",
        [
            _to_pool(
                timeseries(
                    "Idle and pending GPUs per pool",
                    [idle, pending],
                    "none",
                    "A pool with pending GPUs while another holds idle ones is a rebalancing candidate.",
                )
            ),
            row_link(
                table(
                    "Idle and pending now",
                    [
                        Q(POOL_IDLE_GPUS.expr(POOLS), "idle"),
                        Q(POOL_PENDING_GPUS.expr(POOLS), "pending"),
                    ],
                    rename={"Value #A": "idle GPUs", "Value #B": "pending GPUs"},
                    sort_by="pending GPUs",
                ),
                pool.UID,
                "pool",
                "pool",
                "Pool",
            ),
        ],
        height=9,
        widths=(16, 8),
    )


def _alerts() -> Row:
    return Row(
        "Alerts",
        [
            table(
                "Top firing alerts",
                [Q(f"topk(10, count by (alertname, severity) ({FIRING}))", "firing")],
                rename={"Value": "series firing"},
                sort_by="series firing",
            ),
            timeseries(
                "Firing alerts by name", [Q(f"count by (alertname) ({FIRING})", "{{alertname}}")], "none"
            ),
            table(
                "Scrape targets down",
                [Q("up == 0")],
                "Exporters Prometheus could not scrape.",
                hide=("Time", "__name__", "Value"),
            ),
        ],
        height=9,
        widths=(8, 10, 6),
    )


def build() -> Any:
    """The fleet overview dashboard."""
    return dashboard(
        UID,
        "ibpool / Fleet overview",
        "GPUs per pool, allocation and utilization over time, idle against pending GPUs, firing alerts.",
        [_totals(), _pools(), _balance(), _alerts()],
        variables=[label_values("pool", "ibpool_pool_capacity_gpus", "pool", title="Pool")],
    )
