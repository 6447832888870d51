"""Alert-like events the demo evaluates on each signals snapshot (no Alertmanager in the demo).

Names follow alerts/alert_rules.yml; conditions are the rules' in spirit, evaluated once per cycle with no
`for:` delay: `IbPortCongested` (a switch port waits at least 20 % of the time), `GpuPoolImbalanced` (a pool
queues at least one node's worth of GPUs while another has idle nodes), `NodeUnavailable` (a node drained,
draining or down). Each condition fires once and resolves once.
"""

from __future__ import annotations

from typing import Any

from recommender.signals.model import Signals

CONGESTED = 0.2
OFFLINE = ("drained", "draining", "down")

Alert = tuple[str, str, dict[str, Any]]  # kind (alert | resolved), summary, detail


class AlertTracker:
    """Remembers what is firing; `update` returns what fired and what resolved."""

    def __init__(self, high_pool: str, gpus_per_node: int = 8) -> None:
        self.high_pool = high_pool
        self.gpus_per_node = gpus_per_node
        self.firing: dict[str, str] = {}  # key -> its label for the `resolved` line

    def _conditions(self, signals: Signals) -> dict[str, tuple[str, dict[str, Any]]]:
        now: dict[str, tuple[str, dict[str, Any]]] = {}
        for link in signals.links.values():
            if link.kind != "fabric" or link.congestion is None or link.congestion < CONGESTED:
                continue
            port = link.key.split("/")[-1]
            pools = ", ".join(link.pools) or "no pool"
            now[f"IbPortCongested:{link.key}"] = (
                f"IbPortCongested {link.desc}/{port}: waits {link.congestion:.0%} ({pools})",
                {"link": link.key, "congestion": link.congestion, "pools": list(link.pools)},
            )
        idle = {p.name for p in signals.pools.values() if p.idle_nodes > 0}
        for pool in signals.pools.values():
            others = sorted(idle - {pool.name})
            if pool.pending_gpus >= self.gpus_per_node and others:
                now[f"GpuPoolImbalanced:{pool.name}"] = (
                    f"GpuPoolImbalanced {pool.name}: {pool.pending_gpus} GPUs pending while "
                    f"{', '.join(others)} has idle nodes",
                    {"pool": pool.name, "pending_gpus": pool.pending_gpus},
                )
        for node in signals.nodes.values():
            if node.state in OFFLINE:
                now[f"NodeUnavailable:{node.name}"] = (
                    f"NodeUnavailable {node.name}: {node.state}",
                    {"node": node.name, "state": node.state},
                )
        return now

    def update(self, signals: Signals) -> list[tuple[str, str, dict[str, Any]]]:
        """Fire new conditions and resolve gone ones (a missing signal group changes nothing)."""
        if signals.missing:
            return []
        out: list[tuple[str, str, dict[str, Any]]] = []
        now = self._conditions(signals)
        for key, (summary, detail) in sorted(now.items()):
            if key not in self.firing:
                out.append(("alert", summary, {"alert": key.split(":")[0], **detail}))
                self.firing[key] = summary.split(":")[0]  # the alert and what it is about
        for key in sorted(set(self.firing) - set(now)):
            out.append(("resolved", self.firing.pop(key), {"alert": key.split(":")[0], "key": key}))
        return out
