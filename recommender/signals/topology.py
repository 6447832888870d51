"""Which pools' traffic crosses a port: from node -> pool labels, the cabling and, when read, the routes.

An HCA port carries its node's pools. With the switches' forwarding tables
(`ibpool_fabric_port_route_info` for every cabled switch), a switch port carries pool X when a path
crossing it goes from a host of X to a host of X or to a host the scheduler does not know (storage, login;
`routes.RouteTrace`). Without them (an exporter that does not read them, or a switch whose table is
missing) the cabling decides: a switch port cabled to an HCA carries that node's pools; a port between two
switches carries the pools of the hosts under the switch that has hosts (a leaf's uplink: the leaf's
hosts; a spine's downlink: the hosts of the leaf below). The node of an HCA is the first word of its node
description (OpenSM's `hostname mlx5_0` convention).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from recommender.signals.raw import LinkInfo
from recommender.signals.routes import PortKey, node_of_desc, traced

__all__ = ["FabricTopology", "node_of_desc"]


class FabricTopology:
    """Port -> pools for switch ports, from link info, the switch set and (when complete) the routes."""

    def __init__(
        self,
        links: Iterable[LinkInfo],
        switches: Iterable[str],
        pools_of_node: Mapping[str, tuple[str, ...]],
        routes: Mapping[PortKey, tuple[str, ...]] | None = None,
    ) -> None:
        links = list(links)
        self._switches = set(switches)
        self._pools_of_node = pools_of_node
        self._remote: dict[tuple[str, str], LinkInfo] = {}
        hosts: dict[str, set[str]] = defaultdict(set)
        for link in links:
            self._remote[(link.node_guid, link.port)] = link
            if link.remote_guid not in self._switches:
                hosts[link.node_guid].add(node_of_desc(link.remote_desc))
        self._hosts = hosts
        self._routed: dict[PortKey, tuple[str, ...]] | None = None
        if routes:
            trace = traced(links, self._switches, routes)
            self._routed = trace.pools(pools_of_node) if trace.complete else None

    @property
    def routed(self) -> bool:
        """Whether the routes decide (every cabled switch's forwarding table is known)."""
        return self._routed is not None

    def _pools(self, nodes: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({p for n in nodes for p in self._pools_of_node.get(n, ())}))

    def pools_of_port(self, guid: str, port: str) -> tuple[str, ...]:
        """Pools whose traffic leaves through switch port (guid, port); () when the cabling is unknown."""
        link = self._remote.get((guid, port))
        if link is None:
            return ()
        if self._routed is not None:
            return self._routed.get((guid, port), ())
        if link.remote_guid not in self._switches:
            return self._pools([node_of_desc(link.remote_desc)])
        if self._hosts.get(guid):
            return self._pools(self._hosts[guid])
        return self._pools(self._hosts.get(link.remote_guid, ()))
