"""Constructed Signals for policy and cycle tests: pools hi (rank 1) and lo share one leaf uplink."""

from __future__ import annotations

from recommender.signals.model import LinkSignals, Missing, NodeSignals, PoolSignals, QosSignals, Signals

CAP = 50e9


def hca(node: str, pool: str, util: float, wait: float | None) -> LinkSignals:
    """A node's HCA port."""
    return LinkSignals(f"{node}/mlx5_0/1", "hca", node, node, wait, util, False, (pool,), {}, CAP, 1.0)


def signals(
    *,
    at: float = 1_800_000_000.0,
    hi_util: float = 0.2,
    hi_wait: float = 0.44,
    uplink_congestion: float | None = 0.5,
    saturated: bool = False,
    vlarb_low: str = "0:64,1:64",
    hi_sl: int = 1,
    missing: tuple[Missing, ...] = (),
) -> Signals:
    """The shared-uplink cluster as signals."""
    pools = {
        "hi": PoolSignals("hi", 16, 16, 0, 0, hi_util, 1.0),
        "lo": PoolSignals("lo", 16, 16, 0, 0, 0.2, 1.0),
    }
    nodes = {
        "node0001": NodeSignals("node0001", ("hi",), "allocated", hi_util, 1.0),
        "node0002": NodeSignals("node0002", ("lo",), "allocated", 0.2, 1.0),
    }
    uplink = LinkSignals(
        "0xleaf/5", "fabric", None, "leaf001", uplink_congestion, 1.0, saturated, ("hi", "lo"), {}, CAP, 1.0
    )
    links = {
        uplink.key: uplink,
        "node0001/mlx5_0/1": hca("node0001", "hi", 0.5, hi_wait),
        "node0002/mlx5_0/1": hca("node0002", "lo", 0.5, 0.44),
    }
    qos = QosSignals("", vlarb_low, tuple(range(8)) * 2, {"hi": hi_sl, "lo": 0}, 0.0)
    return Signals(at, 300.0, "test", pools, nodes, links, qos, missing)
