"""Pool: capacity, queue and utilization of the chosen pools; applied changes as annotations."""

from __future__ import annotations

from typing import Any

from dashboards import node
from dashboards.base import dashboard
from dashboards.layout import Row
from dashboards.links import row_link, series_link
from dashboards.metrics import POOL_ALLOCATION, POOL_GPU_UTILIZATION, POOL_IDLE_GPUS, POOL_PENDING_GPUS
from dashboards.panels import Q, stat, table, timeseries
from dashboards.variables import label_values

UID = "ibpool-pool"
POOLS = 'pool=~"$pool"'
NODES = 'node=~"$node"'


def _now() -> Row:
    def total(metric: str) -> Q:
        return Q(f"sum(ibpool_pool_{metric}{{{POOLS}}})")

    return Row(
        "Now",
        [
            stat("Capacity", [total("capacity_gpus")], "none"),
            stat("Allocated", [total("allocated_gpus")], "none"),
            stat("Idle", [Q(f"sum({POOL_IDLE_GPUS.expr(POOLS)})")], "none"),
            stat("Pending GPUs", [Q(f"sum({POOL_PENDING_GPUS.expr(POOLS)})")], "none"),
            stat("Pending jobs", [total("pending_jobs")], "none"),
            stat("Running jobs", [total("running_jobs")], "none"),
        ],
        height=4,
    )


def _capacity() -> Row:
    by_pool = "sum by (pool) (ibpool_pool_{}{{" + POOLS + "}})"
    return Row(
        "Capacity and queue",
        [
            timeseries(
                "Capacity, allocated and pending GPUs",
                [
                    Q(by_pool.format("capacity_gpus"), "{{pool}} capacity"),
                    Q(by_pool.format("allocated_gpus"), "{{pool}} allocated"),
                    Q(POOL_PENDING_GPUS.expr(POOLS), "{{pool}} pending"),
                ],
                "none",
                "Moves between pools show as annotations (changes applied by the hooks).",
            ),
            timeseries(
                "Queue",
                [
                    Q(by_pool.format("pending_jobs"), "{{pool}} pending jobs"),
                    Q(by_pool.format("running_jobs"), "{{pool}} running jobs"),
                ],
                "none",
            ),
        ],
        height=9,
    )


def _utilization() -> Row:
    return Row(
        "Utilization",
        [
            timeseries(
                "Allocation (allocated / capacity)",
                [Q(POOL_ALLOCATION.expr(POOLS), "{{pool}}")],
                "percentunit",
                max_value=1,
            ),
            timeseries(
                "GPU utilization (pool's nodes)",
                [Q(POOL_GPU_UTILIZATION.expr(POOLS), "{{pool}}")],
                "percentunit",
                max_value=1,
            ),
            series_link(
                timeseries(
                    "GPU utilization per node",
                    [Q(f"avg by (node) (ibpool_gpu_utilization_ratio{{{NODES}}})", "{{node}}")],
                    "percentunit",
                    max_value=1,
                ),
                node.UID,
                "node",
                "node",
                "Node",
            ),
        ],
        height=9,
    )


def _nodes() -> Row:
    return Row(
        "Nodes",
        [
            timeseries(
                "Nodes by scheduler state",
                [Q(f"count by (state) (ibpool_node_state_info{{{NODES}}})", "{{state}}")],
                "none",
                stack=True,
            ),
            row_link(
                table(
                    "Node states now",
                    [Q(f"ibpool_node_state_info{{{NODES}}}")],
                    hide=("Time", "__name__", "instance", "job", "Value"),
                ),
                node.UID,
                "node",
                "node",
                "Node",
            ),
        ],
        height=8,
    )


def build() -> Any:
    """The pool dashboard."""
    return dashboard(
        UID,
        "ibpool / Pool",
        "Capacity, queue and utilization per pool; changes applied by the hooks as annotations.",
        [_now(), _capacity(), _utilization(), _nodes()],
        variables=[
            label_values("pool", "ibpool_pool_capacity_gpus", "pool", title="Pool"),
            label_values("node", f"ibpool_pool_node_info{{{POOLS}}}", "node", title="Node", all_value=None),
        ],
    )
