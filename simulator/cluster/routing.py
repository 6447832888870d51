"""The model's routing as forwarding tables: per switch port, the hosts whose traffic leaves through it.

What `ibpool_fabric_port_route_info` shows for a real fabric, made from the model's own routes
(`Topology.route` between every pair of hosts on every rail, with the links as they are now; worked out
per leaf and destination class rather than per pair, the same rule as `Topology.route`, which
tests/simulator/cluster/test_routing.py checks against every pair's route: docs/simulator.md). Every cabled
switch port is listed, with no hosts where none leave. A host whose own cable on a rail is down is out of
the subnet there (as OpenSM drops it): in no table of that rail, sending nothing, its leaf port carrying
nothing. A destination no path takes through a switch has no entry there (a real table has one for every
LID; no traced path uses it, so the recommender reads the same either way); where the model's route to
a host depends on its source (links down), the host is listed on every port it leaves through.
`switch_tables` gives the same routes per switch and destination HCA port, as a switch's table holds them
(one out port each: where there are several, the lowest).
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
    count, per_leaf = len(topology.node_index), topology.hosts_per_leaf
    groups = [range(first, min(first + per_leaf, count)) for first in range(0, count, per_leaf)]
    for rail in range(topology.rails):
        _route_rail(topology, link_up, rail, groups, out)
    return out


def _route_rail(
    topology: Topology, link_up: Sequence[bool], rail: int, groups: list[range], out: dict[int, set[int]]
) -> None:
    """Add one rail's routes to `out`. A host whose own cable on the rail is down is out of the subnet: it
    is no destination and sends nothing (`Topology.route`); only the hosts on the rail (`present`) count."""
    hca = [topology.hca_port[node][rail] for group in groups for node in group]
    present = [[n for n in group if link_up[topology.host_link[n][rail]]] for group in groups]
    # a host's leaf port carries its traffic when another host on the rail shares the leaf or another leaf
    # reaches it
    reached = {node for hosts in present if len(hosts) > 1 for node in hosts}
    if len(groups) > 1:
        leaves = [topology.leaf_of(group.start, rail) for group in groups]
        reached |= _between_leaves(topology, link_up, rail, leaves=leaves, present=present, hca=hca, out=out)
    for node in reached:
        out[topology.links[topology.host_link[node][rail]].b].add(hca[node])


def _between_leaves(
    topology: Topology,
    link_up: Sequence[bool],
    rail: int,
    *,
    leaves: list[int],
    present: list[list[int]],
    hca: list[int],
    out: dict[int, set[int]],
) -> set[int]:
    """Add the routes from leaf to leaf (up a leaf's uplink, down the spine's cable to the destination's
    leaf) to `out`; returns the hosts (nodes) some other leaf reaches. `present` are each leaf's hosts on
    the rail: a leaf without any sends nothing. The uplink depends only on the destination's class (node mod
    uplinks) and which uplinks are up at both leaves: one choice per (source leaves with the same uplinks
    up, destination leaf, class), not per pair of hosts."""
    links, uplinks = topology.links, topology.uplinks
    masks = [sum(1 << u for u in range(uplinks) if link_up[topology.uplink[leaf][u]]) for leaf in leaves]
    alike: dict[int, list[int]] = {}  # uplink mask -> the sending leaves (groups) with it: they route alike
    for number, mask in enumerate(masks):
        if present[number]:
            alike.setdefault(mask, []).append(number)
    classes = [[[n for n in hosts if n % uplinks == r] for r in range(uplinks)] for hosts in present]
    choices: dict[int, tuple[int, ...]] = {}
    reached: set[int] = set()
    for mask, sources in alike.items():
        source_set = set(sources)
        climbing: list[set[int]] = [set() for _ in range(uplinks)]  # destinations sent up uplink u
        for number, leaf in enumerate(leaves):
            if len(sources) - (number in source_set) == 0:  # no other leaf of these sends to this one
                continue
            both = mask & masks[number]
            if both not in choices:
                choices[both] = _first_up(both, uplinks)
            for residue, u in enumerate(choices[both]):
                nodes = classes[number][residue]
                if u < 0 or not nodes:
                    continue
                sent = [hca[n] for n in nodes]
                climbing[u].update(sent)
                out[links[topology.uplink[leaf][u]].b].update(sent)  # the spine's cable down
                reached.update(nodes)
        for number in sources:
            own = {hca[n] for n in present[number]}
            for u, destinations in enumerate(climbing):
                if destinations:
                    out[links[topology.uplink[leaves[number]][u]].a].update(destinations - own)
    return reached


def _first_up(mask: int, uplinks: int) -> tuple[int, ...]:
    """Per destination class r: the uplink `Topology.route` takes, the first of r, r + 1, ... (mod uplinks)
    up at both ends (a bit of `mask`); -1 where none is."""
    chosen = []
    for residue in range(uplinks):
        ups = [u for k in range(uplinks) if mask >> (u := (residue + k) % uplinks) & 1]
        chosen.append(ups[0] if ups else -1)
    return tuple(chosen)


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
