"""The fabric exporter's forwarding tables against OpenSM's routing on ibsim (real ibroute, ibtracert).

The exported destinations must be the fabric's routing: every host leaves each switch through exactly one
port, a leaf's port cabled to a host routes to that host alone, and every hop `ibtracert` reports (an
independent program walking the fabric's forwarding tables hop by hop) leaves its switch through a port
whose destinations hold the host traced to. After a link goes down OpenSM reroutes, and the next read
shows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from foundation.hostlist import expand_hostlist
from simulator.backends.ibsim_fabric import FatTree, IbsimFabric, missing_programs, poll_until
from simulator.backends.processes import which
from tests.helpers import samples_of
from tests.integration.test_fabric_exporter import Exporter

MISSING = missing_programs() + [name for name in ("ibroute", "ibtracert") if which(name) is None]
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}"),
]

# 3 leaves x 3 HCAs, 2 spines: leaf ports 1-3 hosts, 4-5 uplinks (one to each spine), 6-8 uncabled.
TREE = FatTree(leaves=3, spines=2, hcas_per_leaf=3, ports=8)
_HOP = re.compile(r"^\[(?P<out>\d+)\] -> (?P<kind>switch|ca) port \{(?P<guid>0x[0-9a-fA-F]+)\}\[\d+\]")
Routes = dict[tuple[str, int], list[str]]


@pytest.fixture
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbsimFabric]:
    with IbsimFabric(tmp_path_factory.mktemp("fabric"), TREE) as running:
        running.start_opensm()
        yield running


@pytest.fixture
def exporter(fabric: IbsimFabric) -> Iterator[Exporter]:
    running = Exporter(fabric, routes_interval_seconds=0.001)  # every sweep reads the tables again
    yield running
    running.close()


def _routes(text: str) -> Routes:
    out: Routes = {}
    for labels, value in samples_of(text, "ibpool_fabric_port_route_info").items():
        got = dict(labels)
        assert value == 1
        out[(got["node_guid"], int(got["port"]))] = expand_hostlist(got.get("destinations", ""))
    return out


def _hops(fabric: IbsimFabric, source: str, target: str) -> list[tuple[str, int]]:
    """(switch GUID, out port) of every switch on ibtracert's path from `source` to `target`."""
    result = fabric.run_diag(["ibtracert", str(fabric.lid(source)), str(fabric.lid(target))])
    hops, previous = [], None
    for line in result.stdout.splitlines():
        found = _HOP.match(line.strip())
        if found is None:
            continue
        if previous is not None:
            hops.append((previous, int(found.group("out"))))
        previous = f"0x{int(found.group('guid'), 16):016x}" if found.group("kind") == "switch" else None
    assert hops, result.stdout
    return hops


def _check(fabric: IbsimFabric, routes: Routes, sources: tuple[str, ...]) -> None:
    hosts = sorted(TREE.hca_names)
    switches = {fabric.node_guid(name): name for name in TREE.switch_names}
    assert {guid for guid, _ in routes} == set(switches)
    for guid, name in switches.items():
        leaving = [h for (g, _), names in routes.items() if g == guid for h in names]
        assert sorted(leaving) == hosts, name  # each host exactly once per switch
    for leaf in range(1, TREE.leaves + 1):
        for port in range(1, TREE.hcas_per_leaf + 1):
            assert routes[(fabric.node_guid(f"leaf{leaf}"), port)] == [TREE.hca_of(leaf, port)]
    for source in sources:
        for target in hosts:
            if target != source:
                for hop in _hops(fabric, source, target):
                    assert target in routes[hop], (source, target, hop)


def test_the_exported_destinations_are_opensms_routing(fabric: IbsimFabric, exporter: Exporter) -> None:
    text = exporter.scrape()
    routes = _routes(text)
    assert len(routes) == len(TREE.switch_names) * TREE.ports  # one series per switch port
    _check(fabric, routes, ("node1", "node5"))
    success = samples_of(text, "ibpool_fabric_switch_routes_scrape_success")
    assert len(success) == len(TREE.switch_names) and set(success.values()) == {1}


def test_a_link_down_is_rerouted_and_the_next_read_shows_it(fabric: IbsimFabric, exporter: Exporter) -> None:
    leaf1 = fabric.node_guid("leaf1")
    before = _routes(exporter.scrape())
    assert before[(leaf1, 4)], "OpenSM routes some hosts through leaf1's first uplink"
    fabric.unlink("leaf1", 4)
    poll_until(lambda: not _routes(exporter.scrape())[(leaf1, 4)], 60, "OpenSM to route around leaf1 port 4")
    after = _routes(exporter.scrape())
    assert sorted(after[(leaf1, 5)]) == sorted(set(before[(leaf1, 4)]) | set(before[(leaf1, 5)]))
    _check(fabric, after, ("node1",))
