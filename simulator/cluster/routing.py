"""The model's routing as forwarding tables: per switch port, the hosts whose traffic leaves through it.

What `ibpool_fabric_port_route_info` shows for a real fabric, made from the model's own routes
(`Topology.route` over every pair of hosts on every rail, with the links as they are now). Every cabled
switch port is listed, with no hosts where none leave. A destination no path takes through a switch has
no entry there (a real table has one for every LID; no traced path uses it, so the recommender reads the
same either way); where the model's route to a host depends on its source (links down), the host is
listed on every port it leaves through. `switch_tables` gives the same routes per switch and destination
HCA port, as a switch's table holds them (one out port each: where there are several, the lowest).
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.fabric.model import format_guid
from simulator.cluster.topology import Topology

Destination = tuple[int, int]  # an HCA port: (its node GUID, its port number)


def leaving(topology: Topology, link_up: Sequence[bool]) -> dict[int, set[int]]:
    """Every cabled switch port (index) -> the destination HCA ports (indices) routed out of it."""
    out: dict[int, set[int]] = {}
    for port in topology.ports:
        if port.kind != "hca" and topology.remote(port.index) >= 0:
            out[port.index] = set()
    count = len(topology.node_index)
    up = list(link_up)
    for rail in range(topology.rails):
        for src in range(count):
            for dst in range(count):
                path = topology.route(src, dst, rail, up) if src != dst else None
                for channel in path or ():
                    sender = topology.channel_ports(channel)[0]
                    if sender in out:
                        out[sender].add(topology.hca_port[dst][rail])
    return out


def forwarding(topology: Topology, link_up: Sequence[bool]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(switch GUID, port) -> the hosts routed out of it, for every cabled switch port."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for index, destinations in leaving(topology, link_up).items():
        port = topology.ports[index]
        hosts = {topology.ports[d].node or "" for d in destinations}
        out[(format_guid(port.node_guid), str(port.number))] = tuple(sorted(hosts))
    return out


def switch_tables(topology: Topology, link_up: Sequence[bool]) -> dict[int, dict[Destination, int]]:
    """Switch GUID -> {destination HCA port: out port} for every switch (empty where no route crosses it);
    a destination routed out of several ports (its route depends on the source) gets the lowest."""
    tables: dict[int, dict[Destination, int]] = {guid: {} for guid, _ in topology.switch_guids}
    for index, destinations in sorted(leaving(topology, link_up).items()):
        port = topology.ports[index]
        table = tables[port.node_guid]
        for d in destinations:
            hca = topology.ports[d]
            table.setdefault((hca.node_guid, hca.number), port.number)
    return tables
