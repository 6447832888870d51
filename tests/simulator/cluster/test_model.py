"""The model as a whole: determinism, congestion and QoS controls, faults in the views."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.cluster.errors import ControlError, FaultError
from simulator.cluster.jobs import FAILED, RUNNING
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec
from simulator.cluster.spec import simple_spec
from simulator.cluster.workload import day_night_workload


def run_series(seed: int) -> list[tuple[object, ...]]:
    spec = simple_spec({"day": 16, "night": 16}, oversubscription=2.0, seed=seed)
    model = ClusterModel(spec, day_night_workload("day", "night", 128, 128, seed=seed, load=1.1))
    series: list[tuple[object, ...]] = []
    for _ in range(48):
        model.advance(900)
        view = model.scheduler_view()
        fabric = model.fabric_view()
        series.append(
            (
                tuple(
                    sorted(
                        (p.name, p.running_gpus, p.pending_gpus, p.running_jobs) for p in view.pools.values()
                    )
                ),
                tuple((p.node_guid, p.port, tuple(sorted(p.counters.items()))) for p in fabric.ports),
                tuple((j.job, j.iteration_seconds) for j in model.job_metrics()),
            )
        )
    return series


def test_same_seed_same_series_and_another_seed_differs() -> None:
    first = run_series(3)
    assert first == run_series(3)
    assert first != run_series(4)


def test_congested_uplink_favours_the_higher_weighted_vl() -> None:
    model = ClusterModel(shared_uplink_spec(vlarb_low=((0, 32), (1, 224))))
    hi, lo = model.submit(chatty("hi")), model.submit(chatty("lo"))
    model.advance(60)
    metrics = {m.job: m for m in model.job_metrics()}
    assert metrics[hi].vl == 1 and metrics[lo].vl == 0
    assert metrics[hi].bottleneck == metrics[lo].bottleneck == "leaf001/5"
    assert metrics[hi].rate_bytes_per_second > 5 * metrics[lo].rate_bytes_per_second
    assert metrics[lo].rate_bytes_per_second > 0  # never starved
    uplink = next(c for c in model.fabric_view().channels if (c.tx_desc, c.tx_port) == ("leaf001", 5))
    assert uplink.rate_bytes_per_second == pytest.approx(uplink.capacity_bytes_per_second)
    assert uplink.vl_rates[1] == pytest.approx(uplink.capacity_bytes_per_second * 224 / 256)
    assert uplink.wait_ratio > 0.3


def test_changing_weights_changes_the_next_iteration_times_and_wait_counters() -> None:
    model = ClusterModel(shared_uplink_spec())
    hi, lo = model.submit(chatty("hi")), model.submit(chatty("lo"))
    model.advance(60)
    before = {m.job: m.iteration_seconds for m in model.job_metrics()}
    assert before[hi] == pytest.approx(before[lo])  # equal weights: equal shares
    model.set_vl_weights("", "0:16,1:240")
    after = {m.job: m.iteration_seconds for m in model.job_metrics()}
    assert after[hi] < before[hi] and after[lo] > before[lo]
    port = model.topology.ports.index(
        next(p for p in model.topology.ports if (p.node_desc, p.number) == ("leaf001", 5))
    )
    wait0 = model.fabric_view(include_hcas=False).ports[port].vl_xmit_wait_ticks
    model.advance(60)
    seen = model.fabric_view(include_hcas=False).ports[port]
    wait1 = seen.vl_xmit_wait_ticks
    assert wait1[0] - wait0[0] > wait1[1] - wait0[1] >= 0  # the low-weight VL waits more
    # At NDR, 256-byte ticks fill the 32-bit counters in under a minute of heavy waiting.
    assert seen.counters["port_xmit_wait"] == min(seen.xmit_wait_ticks, 2**32 - 1)


def test_alone_a_job_runs_at_its_uncontended_pace_and_congestion_slows_progress() -> None:
    model = ClusterModel(shared_uplink_spec())
    hi = model.submit(chatty("hi", work=600))
    alone = model.job_metrics()[0]
    assert alone.slowdown == pytest.approx(1.0)
    model.submit(chatty("lo", work=600))
    model.advance(600)
    assert model.jobs[hi].state == RUNNING  # slowed down, not finished yet
    assert model.jobs[hi].progress < 600


def test_moving_a_pool_to_another_sl_moves_its_traffic_to_another_vl() -> None:
    model = ClusterModel(shared_uplink_spec(vlarb_low=((0, 32), (1, 224))))
    lo = model.submit(chatty("lo"))
    model.set_pool_service_level("lo", 1)
    assert model.scheduler_view().pools["lo"].vl == 1
    assert {m.job: m.vl for m in model.job_metrics()}[lo] == 1
    with pytest.raises(ControlError):
        model.set_pool_service_level("lo", 16)
    model.set_sl2vl("1,0")
    assert model.vl_of_pool("lo") == 0


def test_bad_weights_are_refused_and_change_nothing() -> None:
    model = ClusterModel(shared_uplink_spec())
    before = model.qos()
    with pytest.raises(ControlError, match="weight 300"):
        model.set_vl_weights("", "0:300")
    with pytest.raises(ControlError, match="not VL:weight"):
        model.set_vl_weights("", "0-4")
    assert model.qos() == before


def test_a_down_uplink_reroutes_and_a_down_host_link_stalls() -> None:
    spec = simple_spec({"p": 16}, hosts_per_leaf=8, oversubscription=4.0)  # 2 uplinks per leaf
    model = ClusterModel(spec)
    job = model.submit(chatty("p", gpus=128))
    route_before = model.job_metrics()[0]
    model.set_link(model.uplink(0, 0), False)
    model.set_link(model.uplink(0, 1), True)
    metrics = model.job_metrics()[0]
    assert metrics.iteration_seconds < float("inf")  # rerouted over uplink 1
    assert metrics.slowdown >= route_before.slowdown
    model.set_link(model.host_link("node0003"), False)
    stalled = model.job_metrics()[0]
    assert stalled.iteration_seconds == float("inf") and stalled.compute_fraction == 0.0
    assert stalled.rate_bytes_per_second == 0.0 and stalled.bottleneck == "leaf001/3"  # the cable it needs
    progress = model.jobs[job].progress
    model.advance(60)
    assert model.jobs[job].progress == progress
    load = model.node_load("node0001")
    assert max(g.utilization for g in load.gpus) < 0.2  # GPUs wait on the broken ring
    port = model.fabric_view().ports[model.hca_port("node0003")]
    assert port.state_id == 1 and port.counters["link_downed"] == 1
    model.set_link(model.host_link("node0003"), True)
    assert model.job_metrics()[0].iteration_seconds < float("inf")


def test_a_job_stalled_by_a_down_host_cable_holds_no_other_job_back() -> None:
    # head-of-line blocking on (the quota backtest's ground truth): two 6-node jobs on one VL share leaf 2
    spec = simple_spec({"p": 16}, hosts_per_leaf=4, oversubscription=2.0)
    spec = replace(spec, fabric=replace(spec.fabric, hol_blocking=0.5, credit_stall=0.1))
    model = ClusterModel(spec)
    stalled, other = model.submit(chatty("p", gpus=48)), model.submit(chatty("p", gpus=48))
    shared = {m.job: m.rate_bytes_per_second for m in model.job_metrics()}[other]
    model.set_link(model.host_link("node0001"), False)
    rates = {m.job: m.rate_bytes_per_second for m in model.job_metrics()}
    assert rates[stalled] == 0.0
    assert rates[other] > 1.5 * shared  # the fabric the stalled ring left; it sends nothing, blocks nothing


def test_faults_show_up_in_the_views() -> None:
    model = ClusterModel(simple_spec({"p": 4}))
    job = model.submit(chatty("p", gpus=8))
    node = model.spec.nodes[model.jobs[job].nodes[0]]
    model.inject_xid(node, 2, 79)
    model.lose_gpu(node, 3)
    assert model.jobs[job].state == FAILED
    view = model.scheduler_view().nodes[node]
    assert view.state == "drained" and view.lost_gpus == (3,) and "gpu 3 lost" in view.reason
    assert [e.kind for e in model.gpu_events[node]] == ["xid", "lose_gpu"]
    port = model.hca_port("node0002")
    model.add_symbol_errors(port, 7)
    model.saturate(port)
    model.flap_link(model.host_link("node0002"))
    seen = model.fabric_view().ports[port]
    assert seen.counters["symbol_error"] == 7
    assert seen.counters["port_xmit_wait"] == 2**32 - 1
    assert seen.counters["link_downed"] == 1 and seen.state_id == 4
    assert seen.remote_desc == "leaf001" and seen.remote_port == 2
    assert [e.kind for e in model.events][-3:] == ["symbol_errors", "saturate", "flap"]
    with pytest.raises(FaultError):
        model.lose_gpu(node, 8)
    with pytest.raises(FaultError):
        model.saturate(port, "port_xmit_data")


def test_fabric_view_lists_every_port_with_its_far_end() -> None:
    model = ClusterModel(simple_spec({"p": 16}, hosts_per_leaf=8, oversubscription=2.0))
    view = model.fabric_view()
    switches = dict(view.switches)
    assert sorted(switches.values()) == ["leaf001", "leaf002", "spine01", "spine02", "spine03", "spine04"]
    by_key = {(p.node_guid, p.port): p for p in view.ports}
    for port in view.ports:
        if port.remote_guid is None:
            continue
        assert port.remote_port is not None
        far = by_key[(port.remote_guid, port.remote_port)]
        assert (far.remote_guid, far.remote_port) == (port.node_guid, port.port)
    assert sum(1 for p in view.ports if p.kind == "hca") == 16
    assert sum(1 for p in view.ports if p.kind == "leaf" and p.remote_guid is not None) == 16 + 8
