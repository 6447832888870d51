"""Which pools cross a switch port when the forwarding tables are known (a small fat tree, by hand).

Two leaves with two hosts each and a storage host under leaf 2; every leaf has one uplink to each of two
spines. Routing is destination-mod-k: a1 and b1 (and storage) go up through spine 1, a2 and b2 through
spine 2. Pool X is {a1, b1}, pool Y is {a2, b2}: X's traffic only climbs to spine 1, Y's only to spine 2,
while the cabling alone says both pools cross every uplink.
"""

from __future__ import annotations

from pathlib import Path

from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.families import build_families
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.exposition import render
from recommender.signals import queries as q
from recommender.signals import routes as route_module
from recommender.signals.assemble import assemble
from recommender.signals.prometheus import PrometheusSettings, PrometheusSource, Vector
from recommender.signals.raw import LinkInfo, PortReading, RawData, add_route
from recommender.signals.routes import traced
from recommender.signals.scrape import Scrape, add_fabric
from recommender.signals.topology import FabricTopology
from tests.exporter.fabric.helpers import LEAF1, LEAF2, SPINE1, ScriptedRunner

L1, L2, S1, S2 = "0xl1", "0xl2", "0xs1", "0xs2"
SWITCHES = {L1, L2, S1, S2}
POOLS: dict[str, tuple[str, ...]] = {"a1": ("X",), "b1": ("X",), "a2": ("Y",), "b2": ("Y",)}
Routes = dict[tuple[str, str], tuple[str, ...]]


def _link(guid: str, port: int, remote: str, remote_port: int, desc: str) -> LinkInfo:
    return LinkInfo(guid, str(port), guid, remote, str(remote_port), desc)


LINKS = [
    _link(L1, 1, "0xa1", 1, "a1 mlx5_0"),
    _link(L1, 2, "0xa2", 1, "a2 mlx5_0"),
    _link(L1, 3, S1, 1, "spine1"),
    _link(L1, 4, S2, 1, "spine2"),
    _link(L2, 1, "0xb1", 1, "b1 mlx5_0"),
    _link(L2, 2, "0xb2", 1, "b2 mlx5_0"),
    _link(L2, 3, S1, 2, "spine1"),
    _link(L2, 4, S2, 2, "spine2"),
    _link(L2, 5, "0xst", 1, "storage1 mlx5_0"),
    _link(S1, 1, L1, 3, "leaf1"),
    _link(S1, 2, L2, 3, "leaf2"),
    _link(S2, 1, L1, 4, "leaf2"),
    _link(S2, 2, L2, 4, "leaf2"),
]


def _routes(storage_up: int = 3) -> Routes:
    return {
        (L1, "1"): ("a1",), (L1, "2"): ("a2",), (L1, "3"): ("b1", "storage1"), (L1, "4"): ("b2",),
        (L2, "1"): ("b1",), (L2, "2"): ("b2",), (L2, "3"): ("a1",), (L2, "4"): ("a2",),
        (L2, "5"): ("storage1",),
        (S1, "1"): ("a1", "a2"), (S1, "2"): ("b1", "b2", "storage1"),
        (S2, "1"): ("a1", "a2"), (S2, "2"): ("b1", "b2", "storage1"),
    } | ({(L1, "3"): ("b1",), (L1, "4"): ("b2", "storage1")} if storage_up == 4 else {})  # fmt: skip


def _topology(routes: Routes | None, pools: dict[str, tuple[str, ...]] = POOLS) -> FabricTopology:
    return FabricTopology(LINKS, SWITCHES, pools, routes)


def test_without_routes_the_cabling_decides() -> None:
    topo = _topology(None)
    assert not topo.routed
    assert topo.pools_of_port(L1, "3") == ("X", "Y") == topo.pools_of_port(L1, "4")


def test_with_routes_an_uplink_carries_only_the_pools_routed_through_it() -> None:
    topo = _topology(_routes())
    assert topo.routed
    assert topo.pools_of_port(L1, "4") == ("Y",)  # a2 -> b2 only: a1 -> b2 is X to Y
    assert topo.pools_of_port(S2, "2") == ("Y",) and topo.pools_of_port(S2, "1") == ("Y",)
    assert topo.pools_of_port(L1, "1") == ("X",)  # down to a1: b1 -> a1 (a2 -> a1 is Y to X)
    assert topo.pools_of_port(L2, "5") == ("X", "Y")  # storage in no pool: everyone's traffic to it counts


def test_a_host_in_no_pool_makes_every_pool_that_reaches_it_count() -> None:
    assert _topology(_routes()).pools_of_port(L1, "3") == ("X", "Y")  # storage1 is routed up spine 1
    assert _topology(_routes(storage_up=4)).pools_of_port(L1, "3") == ("X",)  # now up spine 2
    assert _topology(_routes(storage_up=4)).pools_of_port(L1, "4") == ("X", "Y")


def test_a_scheduler_node_in_no_pool_runs_no_job_and_draws_no_pool() -> None:
    idle = {**POOLS, "storage1": ()}  # the scheduler knows it, in no partition: no job's traffic goes there
    assert _topology(_routes(), idle).pools_of_port(L1, "3") == ("X",)
    assert _topology(_routes(), idle).pools_of_port(L2, "5") == ()


def test_a_destination_on_two_ports_is_followed_through_both() -> None:
    routes = _routes() | {(L1, "3"): ("b1", "storage1"), (L1, "4"): ("b1", "b2")}  # b1 on both uplinks
    topo = _topology(routes)
    assert topo.pools_of_port(L1, "4") == ("X", "Y") and topo.pools_of_port(S2, "2") == ("X", "Y")


def test_a_missing_table_or_an_unknown_port_falls_back_to_the_cabling() -> None:
    partial = {k: v for k, v in _routes().items() if k[0] != S2}
    topo = _topology(partial)
    assert not topo.routed and topo.pools_of_port(L1, "3") == ("X", "Y")
    assert _topology(_routes()).pools_of_port(L1, "9") == ()  # not cabled


def test_a_pool_with_idle_hosts_still_counts_where_its_hosts_route() -> None:
    pools = {**POOLS, "a2": ("Y", "burst"), "b2": ("Y", "burst")}  # no job yet: membership is what counts
    assert _topology(_routes(), pools).pools_of_port(L1, "4") == ("Y", "burst")


def test_a_routing_loop_ends() -> None:
    loop = _routes() | {
        (S1, "2"): ("b2", "storage1"),
        (S1, "1"): ("a1", "a2", "b1"),
        (L1, "3"): ("b1", "storage1"),
    }
    topo = _topology(loop)  # b1 bounces between leaf1 and spine1: traced once each way, then stops
    assert topo.pools_of_port(S1, "1") == ("X",)


def test_traces_are_cached_by_routes_and_pools_by_assignment() -> None:
    route_module._CACHE.clear()
    first = traced(LINKS, SWITCHES, _routes())
    assert traced(list(LINKS), set(SWITCHES), dict(_routes())) is first
    assert traced(LINKS, SWITCHES, _routes(storage_up=4)) is not first
    pools = first.pools(POOLS)
    assert first.pools(dict(POOLS)) is pools and first.pools({**POOLS, "a1": ("Y",)}) is not pools
    for k in range(route_module.CACHED + 1):
        traced(LINKS, SWITCHES, _routes() | {(L2, "6"): (f"extra{k}",)})
    assert len(route_module._CACHE) == route_module.CACHED


def test_assemble_uses_the_routes_for_switch_ports() -> None:
    raw = RawData(links=list(LINKS), switches=set(SWITCHES))
    raw.pool_nodes = {"X": {"a1", "b1"}, "Y": {"a2", "b2"}}
    raw.node_state = dict.fromkeys(["a1", "a2", "b1", "b2"], "allocated")
    raw.ports = [PortReading("fabric", L1, "leaf1", p, 0.3, 0.9, False, {0: 0.3}, 1e9) for p in ("3", "4")]
    plain = assemble(raw, taken_at=1.0, window_seconds=60.0, source="t", max_age_seconds=60.0, qos=None)
    assert plain.links[f"{L1}/4"].pools == ("X", "Y")
    for (guid, port), hosts in _routes().items():
        assert add_route(raw.routes, guid, port, ",".join(hosts))
    routed = assemble(raw, taken_at=1.0, window_seconds=60.0, source="t", max_age_seconds=60.0, qos=None)
    assert routed.links[f"{L1}/4"].pools == ("Y",) and routed.links[f"{L1}/3"].pools == ("X", "Y")
    raw.node_state["storage1"] = "idle"  # a scheduler node after all, in no pool
    idle = assemble(raw, taken_at=1.0, window_seconds=60.0, source="t", max_age_seconds=60.0, qos=None)
    assert idle.links[f"{L1}/3"].pools == ("X",)


def test_a_bad_host_list_is_refused() -> None:
    routes: Routes = {}
    assert add_route(routes, L1, "1", "node[1-3],node7") and routes[(L1, "1")] == (
        "node1",
        "node2",
        "node3",
        "node7",
    )
    assert add_route(routes, L1, "2", "") and routes[(L1, "2")] == ()
    assert not add_route(routes, L1, "3", "node[1-")


def test_the_embedded_scrape_reads_what_the_fabric_exporter_serves(tmp_path: Path) -> None:
    sweeper = Sweeper(
        DiagCommands(DiagOptions()), ScriptedRunner(), SweepSettings(vl_counters="off"), tmp_path
    )
    result = sweeper.sweep()
    sweeper.close()
    scrape = Scrape()
    add_fabric(scrape, render(build_families(result, NameMap())), 0.0)
    assert scrape.routes[(LEAF1, "3")] == ("node3", "node4") and scrape.routes[(LEAF1, "6")] == ()
    assert scrape.routes[(SPINE1, "1")] == ("node1", "node2") and scrape.routes[(LEAF2, "1")] == ("node3",)
    assert len(scrape.routes) == 18 and not scrape.routes_unreadable
    garbled = Scrape()
    add_fabric(
        garbled,
        'ibpool_fabric_port_route_info{node_guid="0x1",port="1",node_desc="x",destinations="n[1-"} 1\n',
        0.0,
    )
    assert garbled.routes_unreadable


class _Canned(PrometheusSource):
    """Answers each query from a table (a unit test of the parsing; the real server: integration tests)."""

    def __init__(self, answers: dict[str, Vector]) -> None:
        super().__init__(PrometheusSettings("http://127.0.0.1:9"), None)
        self.answers = answers

    def query(self, expr: str, at: float) -> Vector:
        return self.answers.get(expr, [])


def test_the_prometheus_source_reads_the_routes() -> None:
    def route(guid: str, port: str, hosts: str) -> tuple[dict[str, str], float]:
        labels = {"node_guid": guid, "port": port} | ({"destinations": hosts} if hosts else {})
        return labels, 1.0

    answers = {q.FABRIC_ROUTES: [route(L1, "3", "b1,storage1"), route(L1, "5", ""), route(S1, "2", "b[1-2]")]}
    raw = RawData()
    _Canned(answers)._links(raw, 0.0)
    assert raw.routes == {(L1, "3"): ("b1", "storage1"), (L1, "5"): (), (S1, "2"): ("b1", "b2")}
    answers[q.FABRIC_ROUTES].append(route(S2, "1", "a[1-"))
    raw = RawData()
    _Canned(answers)._links(raw, 0.0)
    assert raw.routes == {}  # one unreadable host list: no routes at all (the cabling decides)
