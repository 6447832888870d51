"""`Topology.route`: a host whose own cable on a rail is down is out of the subnet on that rail only."""

from __future__ import annotations

from simulator.cluster.spec import ClusterSpec, FabricSpec, PoolSpec, node_names, validate
from simulator.cluster.topology import Topology


def two_rail_tree() -> Topology:
    """12 nodes, 4 per leaf, 2 rails (6 leaves), 2 uplinks per leaf."""
    names = node_names(12)
    fabric = FabricSpec(hosts_per_leaf=4, oversubscription=2.0)
    return Topology(
        validate(ClusterSpec(nodes=names, pools=(PoolSpec("p", names),), fabric=fabric, ports_per_node=2))
    )


def test_a_down_host_cable_leaves_its_host_no_route_on_that_rail_only() -> None:
    topo = two_rail_tree()
    up = [True] * len(topo.links)
    host, leaf_mate, far = 1, 2, 9  # node 2 shares node 1's leaves, node 9 is on other leaves
    up[topo.host_link[host][0]] = False
    for other in (leaf_mate, far):
        assert topo.route(host, other, 0, up) is None  # the source's own cable down
        assert topo.route(other, host, 0, up) is None  # the destination's own cable down
        assert topo.route(host, other, 1, up) is not None  # the other rail is untouched
        assert topo.route(other, host, 1, up) is not None
    assert topo.route(leaf_mate, far, 0, up) is not None  # nor are the other hosts of the leaf
    assert topo.route(far, leaf_mate, 0, up) is not None
    up[topo.host_link[host][0]] = True
    assert topo.route(host, far, 0, up) == (
        2 * topo.host_link[host][0],
        2 * topo.uplink[topo.leaf_of(host, 0)][far % topo.uplinks],
        2 * topo.uplink[topo.leaf_of(far, 0)][far % topo.uplinks] + 1,
        2 * topo.host_link[far][0] + 1,
    )
