"""The quota backtest's pieces: the scenario family, the ground truth's extra effects, the policy's
counter-only view, and the three strategies on a few scenarios (the family's table is printed by
benchmarks/quota_backtest.py, not asserted here)."""

from __future__ import annotations

import pytest

from exporter.fabric.model import format_guid
from simulator.cluster import scenarios as small
from simulator.cluster.effects import FabricEffects, block_victims, effective_weights
from simulator.cluster.model import ClusterModel
from simulator.cluster.routing import forwarding
from simulator.cluster.sharing import Flow
from simulator.cluster.spec import FabricSpec, QosSpec
from simulator.cluster.topology import LEAF_GUID_BASE
from simulator.quota_backtest import (
    HINDSIGHT,
    POLICY,
    STATIC,
    backtest,
    family,
    fresh,
    fresh2,
    hindsight,
    pick,
    run,
    scenario,
    summary,
    table,
)
from simulator.quota_backtest.backtest import WITHIN
from simulator.quota_backtest.counters import signals, snapshot
from simulator.quota_backtest.scenarios import (
    DEV,
    EXTRA,
    EXTRA_SEEDS,
    FRESH,
    FRESH2,
    FRESH2_SEED,
    FRESH_COUNT,
    FRESH_SEED,
    HELD_OUT,
    SEED,
)


def _shared(**fabric: object) -> ClusterModel:
    spec = small.shared_uplink_spec()
    spec = type(spec)(**{**vars(spec), "fabric": FabricSpec(**{**vars(spec.fabric), **fabric})})
    return ClusterModel(spec, [small.chatty("hi"), small.chatty("lo")])


def _hi(model: ClusterModel) -> float:
    return next(j.slowdown for j in model.job_metrics() if j.pool == "hi")


def test_the_family_covers_what_the_issue_asks() -> None:
    scenarios = family(60)
    assert len(scenarios) >= 50
    assert {s.oversubscription for s in scenarios} == {1.0, 2.0, 3.0, 4.0}
    assert {s.leaves for s in scenarios} == {2, 3, 4}
    assert {len(s.pools) for s in scenarios} >= {2, 3, 4}
    assert any(s.burst for s in scenarios) and not all(s.burst for s in scenarios)
    assert {s.split for s in scenarios} == {DEV, HELD_OUT}
    assert any(s.arbitration_packets for s in scenarios) and any(s.hol_blocking for s in scenarios)
    assert len({(j.compute_seconds, j.allreduce_bytes) for s in scenarios for j in s.jobs}) >= 10
    assert scenario(7) == scenario(7) and scenario(7) != scenario(8)


def test_the_fresh_held_out_set_is_a_second_seed_of_the_same_generator() -> None:
    scenarios = fresh()
    assert FRESH_SEED != SEED and len(scenarios) == FRESH_COUNT >= 60
    assert {s.split for s in scenarios} == {FRESH} and all(s.name.startswith("f") for s in scenarios)
    assert scenarios[5] == scenario(5, FRESH_SEED) and scenarios[5].split == FRESH
    assert [s.jobs for s in scenarios[:10]] != [s.jobs for s in family(10)]  # not the first family again
    assert {s.oversubscription for s in scenarios} == {1.0, 2.0, 3.0, 4.0}
    assert [s.split for s in pick(DEV, 6)] == [DEV] * 3
    assert [s.split for s in pick(FRESH, 6, 2)] == [FRESH] * 2
    assert [s.split for s in pick("all", 4, 1)] == [DEV, HELD_OUT, DEV, HELD_OUT, FRESH]
    extra = pick(EXTRA, 2)
    assert len(extra) == 2 * len(EXTRA_SEEDS) and {s.split for s in extra} == {EXTRA}
    assert FRESH_SEED not in EXTRA_SEEDS and SEED not in EXTRA_SEEDS and "s01@100 " in extra[1].name


def test_the_third_held_out_set_is_a_seed_never_used_before_and_not_in_all() -> None:
    third = fresh2(3)  # drawn, never run here (docs/quota_backtest.md: run once, on the frozen policy)
    assert FRESH2_SEED not in (SEED, FRESH_SEED, *EXTRA_SEEDS)
    assert {s.split for s in third} == {FRESH2} and [s.name[:4] for s in third] == ["g00 ", "g01 ", "g02 "]
    assert third[2] == scenario(2, FRESH2_SEED) and [s.jobs for s in third] != [s.jobs for s in fresh(3)]
    assert [s.split for s in pick(FRESH2, 6, 2)] == [FRESH2] * 2
    assert FRESH2 not in {s.split for s in pick("all", 2, 2)}


def test_packets_make_a_cut_below_one_packet_do_nothing() -> None:
    effects = FabricEffects(arbitration_packets=True)
    assert effective_weights([16, 64, 65, 0], effects) == [64, 64, 128, 0]
    plain, packets = _shared(), _shared(arbitration_packets=True)
    for model in (plain, packets):
        model.set_vl_weights("", "0:16,1:64")
        model.advance(10)
    assert _hi(plain) < _hi(packets)  # the cut to 16 helped `hi` only where arbitration is byte exact
    packets.set_vl_weights("", "0:64,1:64")
    packets.advance(10)
    assert _hi(packets) == pytest.approx(_hi(_shared()))


def test_credit_stalls_and_hol_blocking_cost_bandwidth() -> None:
    plain, stalled = _shared(), _shared(credit_stall=0.3)
    plain.advance(10)
    stalled.advance(10)
    assert _hi(stalled) > _hi(plain)
    assert sum(stalled.fabric.rate.values()) < sum(plain.fabric.rate.values())
    held = Flow(1, (0, 1), 0, 40.0, rate=20.0, bottleneck=1)  # held back at channel 1, half of its demand
    victim = Flow(2, (0, 2), 0, 20.0, rate=20.0)  # same VL through channel 0, bound elsewhere
    other_vl = Flow(3, (0, 3), 1, 20.0, rate=20.0)
    block_victims([held, victim, other_vl], FabricEffects(hol_blocking=0.6))
    assert victim.rate == pytest.approx(20.0 * (1 - 0.6 * 0.5 * 20.0 / 60.0))  # its share of channel 0
    assert victim.bottleneck == 0  # limited where it waits behind the held-back flow
    assert other_vl.rate == 20.0 and held.rate == 20.0
    block_victims([held, victim], FabricEffects())  # off: nothing changes
    assert victim.rate < 20.0


def test_the_policy_sees_counters_only() -> None:
    model = _shared()
    before = snapshot(model)
    model.advance(60)
    view = signals(model, before)
    uplink = max(view.links.values(), key=lambda link: link.congestion or 0.0)
    assert uplink.kind == "fabric" and set(uplink.pools) == {"hi", "lo"}
    tx = max(model.fabric.wait, key=lambda c: model.fabric.wait[c])
    assert uplink.congestion == pytest.approx(model.fabric.wait[tx], rel=1e-6)  # the wait counter's rate
    assert {vl for vl, wait in uplink.vl_congestion.items() if wait > 0} == {0, 1}
    assert set(uplink.vl_congestion) == set(range(8))  # a switch port's VLs read 0 where none waited
    assert view.qos is not None and view.qos.pool_sl == {"hi": 1, "lo": 0}
    assert not view.missing
    with pytest.raises(ValueError):
        signals(model, snapshot(model))


def test_the_policy_sees_the_models_routes() -> None:
    chosen = scenario(1)  # s01 3x4: hi {1, 2, 9}, mid {3, 10}, lo {4, 11, 12}; 5-8 idle, in no pool
    model = ClusterModel(chosen.spec(), chosen.requests())
    before = snapshot(model)
    model.advance(60)
    view = signals(model, before)
    leaf1 = format_guid(LEAF_GUID_BASE)
    # leaf1 sends node0009 and node0011 up its first uplink (port 5), node0010 and node0012 up the second
    assert view.links[f"{leaf1}/5"].pools == ("hi", "lo")  # the cabling alone would say hi, lo and mid
    assert view.links[f"{leaf1}/6"].pools == ("lo", "mid")
    routes = forwarding(model.topology, model.fabric.link_up)
    cabled = {key for key, x in view.links.items() if x.kind == "fabric"}
    assert {f"{g}/{p}" for g, p in routes} == cabled
    leaf_hosts = [h for (g, _), hosts in routes.items() if g == leaf1 for h in hosts]
    assert sorted(leaf_hosts) == [f"node{i:04d}" for i in range(1, 13)]  # each host once at leaf1


def test_three_strategies_on_a_congested_scenario() -> None:
    congested = scenario(18)
    static, policy, best = run(congested, STATIC), run(congested, POLICY), hindsight(congested)
    assert static.congested_links >= 1
    assert static.hi_slowdown is not None and static.hi_slowdown > WITHIN
    assert policy.hi_slowdown is not None and policy.hi_slowdown < static.hi_slowdown
    assert policy.min_share_kept and policy.changes >= 1
    assert best.strategy == HINDSIGHT and best.ok
    assert policy.weights != static.weights
    assert (policy.others_slowdown or 0) >= (static.others_slowdown or 0)  # the cost to the others


def test_the_table_and_the_safety_property() -> None:
    rows = backtest(family(12))
    text = table(rows)
    assert "policy where hindsight ok" in text and "held-out" in text and "cost to the others" in text
    assert len(text.splitlines()) >= 12 + 10
    assert table(rows, per_scenario=False).splitlines() == text.splitlines()[2 + len(rows) :]
    figures = summary(rows)
    assert figures["scenarios"] == 12
    assert figures["policy_below_min_share"] == 0  # the policy never takes another pool below its share
    assert int(str(figures["policy_ok"])) >= int(str(figures["static_ok"]))
    assert all(QosSpec().vlarb_low for _ in rows)
