"""The signals snapshot: per pool, per node, per port/link and the QoS tables, each with its age.

A group of signals that could not be read, or is older than the source's `max_age_seconds`, is listed in
`Signals.missing` (its name and why); a policy that needs it does not run. Ratios are 0-1; None means the
value is not known (never guessed): e.g. the congestion of a port whose 32-bit wait counter is saturated.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

POOLS = "pools"
NODES = "nodes"
LINKS = "links"
QOS = "qos"
GROUPS = (POOLS, NODES, LINKS, QOS)


@dataclass(frozen=True)
class PoolSignals:
    """One pool (scheduler partition) now."""

    name: str
    capacity_gpus: int
    allocated_gpus: int
    pending_gpus: int
    idle_nodes: int  # member nodes in state idle (whole nodes free)
    utilization: float | None  # mean GPU utilization of its nodes (idle GPUs count as 0)
    age_seconds: float


@dataclass(frozen=True)
class NodeSignals:
    """One node: its pools, scheduler state and mean GPU utilization."""

    name: str
    pools: tuple[str, ...]
    state: str
    gpu_utilization: float | None
    age_seconds: float


@dataclass(frozen=True)
class LinkSignals:
    """One transmitting port (HCA port of a node, or a switch port) over the rate window."""

    key: str  # `node/device/port` for an HCA port, `node_guid/port` for a switch port
    kind: str  # "hca" | "fabric"
    node: str | None  # the compute node of an HCA port
    desc: str  # node description (switch name) or node name
    congestion: float | None  # share of time data waited to be sent (None: unknown, e.g. saturated)
    utilization: float | None  # data sent over the signalling rate
    saturated: bool  # the 32-bit PortXmitWait counter sits at 2^32-1
    pools: tuple[str, ...]  # pools whose traffic crosses it
    vl_congestion: Mapping[int, float]  # per-VL wait share (saturated VLs left out)
    rate_bytes_per_second: float
    age_seconds: float


@dataclass(frozen=True)
class QosSignals:
    """OpenSM's QoS tables in force and each pool's service level."""

    vlarb_high: str
    vlarb_low: str
    sl2vl: tuple[int, ...]
    pool_sl: Mapping[str, int]
    age_seconds: float

    def vl_of(self, pool: str) -> int | None:
        """The VL a pool's traffic uses (None when its SL is unknown)."""
        sl = self.pool_sl.get(pool)
        if sl is None or not self.sl2vl:
            return None
        return self.sl2vl[sl % len(self.sl2vl)]


@dataclass(frozen=True)
class Missing:
    """A signal group (or one signal in it) that could not be used, and why."""

    signal: str
    reason: str

    def __str__(self) -> str:
        return f"{self.signal}: {self.reason}"


@dataclass(frozen=True)
class Signals:
    """Everything the policies read, taken at `taken_at` (Unix seconds) over `window_seconds`."""

    taken_at: float
    window_seconds: float
    source: str
    pools: Mapping[str, PoolSignals] = field(default_factory=dict)
    nodes: Mapping[str, NodeSignals] = field(default_factory=dict)
    links: Mapping[str, LinkSignals] = field(default_factory=dict)
    qos: QosSignals | None = None
    missing: tuple[Missing, ...] = ()

    def lacking(self, needed: Collection[str]) -> list[Missing]:
        """The missing entries that concern any of the `needed` groups."""
        return [m for m in self.missing if m.signal.split(".")[0] in needed]
