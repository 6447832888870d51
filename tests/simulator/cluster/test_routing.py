"""The forwarding tables made from the model's routes: the same as routing every pair of hosts, always.

`all_pairs_leaving` is the reference: the first implementation of `routing.leaving`, which asks
`Topology.route` for every (source, destination, rail) and marks each switch port the path leaves through.
The tables must equal it on every topology built here (partial leaves, one host per leaf, one leaf, several
rails, fewer or more spines than uplinks) with every link up, with each uplink down, with every uplink
state of a small tree, and with random links down (host links included: a host whose own cable is down is
no destination and no source on that rail).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from exporter.fabric.model import format_guid
from simulator.cluster.routing import forwarding, leaving, switch_tables
from simulator.cluster.spec import ClusterSpec, FabricSpec, PoolSpec, node_names, validate
from simulator.cluster.topology import Topology


def all_pairs_leaving(topology: Topology, link_up: Sequence[bool]) -> dict[int, set[int]]:
    """Every cabled switch port -> the destination HCA ports routed out of it, from every pair's route."""
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


def topology(
    nodes: int, hosts_per_leaf: int, oversubscription: float, spines: int | None = None, rails: int = 1
) -> Topology:
    """The fat tree of a one-pool spec."""
    names = node_names(nodes)
    fabric = FabricSpec(hosts_per_leaf=hosts_per_leaf, oversubscription=oversubscription, spines=spines)
    spec = ClusterSpec(nodes=names, pools=(PoolSpec("p", names),), fabric=fabric, ports_per_node=rails)
    return Topology(validate(spec))


TOPOLOGIES = {
    "one host": (1, 4, 1.0, None, 1),
    "one leaf": (5, 8, 2.0, None, 1),
    "one leaf per rail": (6, 8, 2.0, None, 2),
    "partial last leaf": (9, 4, 2.0, None, 1),
    "last leaf holds one host": (13, 4, 1.0, None, 1),
    "one host per leaf": (5, 1, 1.0, None, 1),
    "2-level 2:1": (32, 8, 2.0, None, 1),
    "three uplinks": (20, 6, 2.0, None, 1),
    "fewer spines than uplinks": (24, 4, 1.0, 2, 1),
    "one spine": (16, 4, 2.0, 1, 1),
    "more spines than uplinks": (18, 4, 2.0, 5, 1),
    "two rails": (22, 4, 2.0, None, 2),
    "three rails, two spines": (15, 4, 1.0, 2, 3),
    "32 leaves": (128, 4, 2.0, None, 1),
}


def uplinks(topo: Topology) -> list[int]:
    """Every leaf-spine link."""
    return [link.index for link in topo.links if link.kind == "uplink"]


def with_down(topo: Topology, down: Sequence[int]) -> list[bool]:
    """Link states with the links `down` down and every other up."""
    up = [True] * len(topo.links)
    for link in down:
        up[link] = False
    return up


def link_states(topo: Topology, seed: int) -> list[list[bool]]:
    """All up; each uplink down alone (at most 24 of them); all of one leaf's uplinks down; every uplink
    down; one host link down; every host link of the first leaf down but one, and all of them (a leaf that
    sends nothing); random states, from a few links down to most of them."""
    spread = uplinks(topo)
    states = [with_down(topo, ())]
    states += [with_down(topo, (link,)) for link in spread[:: max(1, len(spread) // 24)]]
    if spread:
        states.append(with_down(topo, topo.uplink[0]))
        states.append(with_down(topo, spread))
    states.append(with_down(topo, (topo.host_link[0][0],)))
    first_leaf = [topo.host_link[n][0] for n in range(min(topo.hosts_per_leaf, len(topo.host_link)))]
    states.append(with_down(topo, first_leaf[1:]))
    states.append(with_down(topo, first_leaf))
    rng = random.Random(seed)
    for share in (0.05, 0.2, 0.5, 0.8):
        for _ in range(3):
            states.append([rng.random() >= share for _ in topo.links])
    return states


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_the_tables_are_every_pairs_routes(name: str) -> None:
    topo = topology(*TOPOLOGIES[name])
    for number, up in enumerate(link_states(topo, seed=len(name))):
        down = [i for i, state in enumerate(up) if not state]
        assert leaving(topo, up) == all_pairs_leaving(topo, up), (
            f"{name}, links down: {down} (state {number})"
        )


def test_every_uplink_state_of_a_small_tree() -> None:
    topo = topology(10, 3, 1.5, spines=None)  # 4 leaves (the last with one host), 2 uplinks each
    spread = uplinks(topo)
    assert len(spread) == 8
    for downs in itertools.product((False, True), repeat=len(spread)):
        up = with_down(topo, [link for link, down in zip(spread, downs, strict=True) if down])
        assert leaving(topo, up) == all_pairs_leaving(topo, up), f"uplinks down: {downs}"


def test_a_destination_reached_over_several_uplinks_is_listed_on_each() -> None:
    # one spine cabled twice to every leaf: with one of leaf 0's cables down, leaf 0 reaches node 4 by its
    # other uplink while leaf 2 keeps node 4's own, so the spine sends node 4 down both of leaf 1's cables
    topo = topology(12, 4, 2.0, spines=1)
    up = with_down(topo, (topo.uplink[0][0],))
    tables = leaving(topo, up)
    spine_ports = [topo.links[topo.uplink[1][u]].b for u in range(2)]
    node4 = topo.hca_port[4][0]
    assert all(node4 in tables[port] for port in spine_ports)
    assert tables == all_pairs_leaving(topo, up)


def test_forwarding_and_switch_tables_follow_the_routes() -> None:
    topo = topology(22, 4, 2.0, spines=None, rails=2)
    up = with_down(topo, (topo.uplink[1][0], topo.uplink[3][1]))
    listed: dict[tuple[str, str], tuple[str, ...]] = {}
    lowest: dict[int, dict[tuple[int, int], int]] = {guid: {} for guid, _ in topo.switch_guids}
    for index, destinations in all_pairs_leaving(topo, up).items():
        port = topo.ports[index]
        listed[(format_guid(port.node_guid), str(port.number))] = tuple(
            sorted({topo.ports[d].node or "" for d in destinations})
        )
        for d in destinations:
            key = (topo.ports[d].node_guid, topo.ports[d].number)
            table = lowest[port.node_guid]
            table[key] = min(table.get(key, port.number), port.number)
    assert forwarding(topo, up) == listed
    assert switch_tables(topo, up) == lowest


def test_a_host_whose_cable_is_down_is_in_no_table_and_comes_back_as_it_was() -> None:
    topo = topology(22, 4, 2.0, spines=None, rails=2)
    up = [True] * len(topo.links)
    before = (leaving(topo, up), forwarding(topo, up), switch_tables(topo, up))
    host, rail = 5, 0  # node0006, rail 0: leaf 2's second host port
    hca = topo.ports[topo.hca_port[host][rail]]
    leaf_port = topo.links[topo.host_link[host][rail]].b
    assert hca.index in before[0][leaf_port]
    up[topo.host_link[host][rail]] = False
    tables = leaving(topo, up)
    assert all(hca.index not in destinations for destinations in tables.values())
    assert tables[leaf_port] == set()  # its leaf port is listed (still cabled) and carries nothing
    switches = switch_tables(topo, up)
    assert all((hca.node_guid, hca.number) not in table for table in switches.values())
    other_rail = topo.ports[topo.hca_port[host][1]]
    assert any((other_rail.node_guid, other_rail.number) in table for table in switches.values())
    up[topo.host_link[host][rail]] = True
    assert (leaving(topo, up), forwarding(topo, up), switch_tables(topo, up)) == before


def test_a_leaf_whose_hosts_are_all_down_sends_nothing_up() -> None:
    topo = topology(16, 4, 2.0)  # 4 leaves, 2 uplinks each
    up = with_down(topo, [topo.host_link[n][0] for n in range(4)])  # every host of leaf 0
    tables = leaving(topo, up)
    for u in range(topo.uplinks):
        assert tables[topo.links[topo.uplink[0][u]].a] == set()  # leaf 0's uplinks carry nothing up
        assert tables[topo.links[topo.uplink[0][u]].b] == set()  # nor does the spine send anything down
    assert tables[topo.links[topo.uplink[1][0]].a]  # the other leaves still reach each other
