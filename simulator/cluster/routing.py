"""The model's routing as forwarding tables: per switch port, the hosts whose traffic leaves through it.

What `ibpool_fabric_port_route_info` shows for a real fabric, made from the model's own routes
(`Topology.route` over every pair of hosts on every rail, with the links as they are now). Every cabled
switch port is listed, with no hosts where none leave. A destination no path takes through a switch has
no entry there (a real table has one for every LID; no traced path uses it, so the recommender reads the
same either way); where the model's route to a host depends on its source (links down), the host is
listed on every port it leaves through.
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.fabric.model import format_guid
from simulator.cluster.topology import Topology


def forwarding(topology: Topology, link_up: Sequence[bool]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(switch GUID, port) -> the hosts routed out of it, for every cabled switch port."""
    leaving: dict[int, set[str]] = {}
    for port in topology.ports:
        if port.kind != "hca" and topology.remote(port.index) >= 0:
            leaving[port.index] = set()
    names = list(topology.node_index)
    up = list(link_up)
    for rail in range(topology.rails):
        for src in range(len(names)):
            for dst, name in enumerate(names):
                path = topology.route(src, dst, rail, up) if src != dst else None
                for channel in path or ():
                    sender = topology.channel_ports(channel)[0]
                    if sender in leaving:
                        leaving[sender].add(name)
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for index, hosts in leaving.items():
        port = topology.ports[index]
        out[(format_guid(port.node_guid), str(port.number))] = tuple(sorted(hosts))
    return out
