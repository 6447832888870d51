"""A scripted incident as the exporters would have collected it: metric families of the catalog's specs.

Four nodes with four GPUs and one HCA port each; pool `hi` (node0001, node0002) and pool `lo` (node0003,
node0004), eight GPUs each. Times are seconds from the start of the report window:

- from 30 min: node0002's mlx5_0 port 1 waits half the time (congestion 0.5: IbPortCongested, warning and
  critical, after their 10 minutes), pool hi queues 8 GPUs while lo has 4 idle (GpuPoolImbalanced after
  15 minutes) and hi's GPUs drop to 40 % utilization;
- at 70 min the change is applied (`APPLY_AT`); from 72 min all is back to normal (congestion 0.02).

`node(name, t)` and `scheduler(t)` are what a node exporter and the scheduler exporter collect at `t`;
their target labels (`targets`) are what a scrape would add, given to the push as `--influx.labels`.
"""

from __future__ import annotations

import itertools

from exporter import catalog
from foundation.exposition import MetricFamily

POOLS = {"hi": ("node0001", "node0002"), "lo": ("node0003", "node0004")}
GPUS_PER_NODE = 4
CONGESTED = "node0002"
INCIDENT_FROM = 30 * 60.0
APPLY_AT = 70 * 60.0
RESOLVED_AT = 72 * 60.0
RATE_BYTES = 50e9  # 4X NDR
TICK_BYTES = 256.0  # the shipped rules' tick for MT4129
XMIT_WAIT = catalog.IB_COUNTERS["port_xmit_wait"][0]
CLUSTER = "lab"


def in_incident(t: float) -> bool:
    """True while the incident lasts."""
    return INCIDENT_FROM <= t < RESOLVED_AT


def targets(node: str | None) -> str:
    """The `--influx.labels` of a node exporter (None: the scheduler exporter)."""
    if node is None:
        return f"job=ibpool-scheduler,instance=slurm-ctl:9472,cluster={CLUSTER},node="
    return f"job=ibpool-node,instance={node},node={node},cluster={CLUSTER}"


def _congestion(node: str, t: float) -> float:
    return 0.5 if node == CONGESTED and in_incident(t) else 0.02


def _wait_ticks(node: str, t: float) -> float:
    """The PortXmitWait counter at t: the integral of the congestion since t = -1 h."""
    start, ticks_per_s = -3600.0, RATE_BYTES / TICK_BYTES
    edges = sorted({start, INCIDENT_FROM, RESOLVED_AT, t})
    total = 0.0
    for a, b in itertools.pairwise(edges):
        if b <= t:
            total += (b - a) * ticks_per_s * _congestion(node, a)
    return round(total)


def node(name: str, t: float) -> list[MetricFamily]:
    """One node exporter's collection at t."""
    pool = next(p for p, nodes in POOLS.items() if name in nodes)
    up, util = MetricFamily(catalog.GPU_UP), MetricFamily(catalog.GPU_UTILIZATION)
    for gpu in range(GPUS_PER_NODE):
        labels = (str(gpu), f"GPU-{name}-{gpu}")
        up.add(labels, 1)
        util.add(labels, (0.4 if in_incident(t) else 0.9) if pool == "hi" else 0.5)
    port = ("mlx5_0", "1")
    info, rate, state, wait = (
        MetricFamily(catalog.IB_PORT_INFO),
        MetricFamily(catalog.IB_RATE),
        MetricFamily(catalog.IB_STATE_ID),
        MetricFamily(XMIT_WAIT),
    )
    info.add_info((*port, "InfiniBand", "0x1", "0x2", "MT4129", "28.39.1002", "MT_0000000838", "NDR"))
    rate.add(port, RATE_BYTES)
    state.add(port, 4)
    wait.add(port, _wait_ticks(name, t))
    return [up, util, info, rate, state, wait]


def scheduler(t: float) -> list[MetricFamily]:
    """The scheduler exporter's collection at t."""
    node_info = MetricFamily(catalog.POOL_NODE_INFO)
    capacity, allocated, pending = (
        MetricFamily(catalog.POOL_CAPACITY_GPUS),
        MetricFamily(catalog.POOL_ALLOCATED_GPUS),
        MetricFamily(catalog.POOL_PENDING_GPUS),
    )
    for pool, nodes in POOLS.items():
        for name in nodes:
            node_info.add_info((pool, name))
        capacity.add((pool,), GPUS_PER_NODE * len(nodes))
        allocated.add((pool,), 8 if pool == "hi" else 4)
        pending.add((pool,), 8 if pool == "hi" and in_incident(t) else 0)
    return [node_info, capacity, allocated, pending]
