"""The quota policy on constructed signals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from proposals import targets
from recommender.policies.quota import QuotaParams, QuotaPolicy, QuotaState, weighted_fill
from recommender.signals.model import LINKS, Missing, NodeSignals, PoolSignals, Signals
from tests.recommender.signals.factory import signals

NOW = 1_800_000_000.0


def policy(**kw: Any) -> QuotaPolicy:
    params = QuotaParams(priorities={"hi": 1}, persistence_seconds=0.0, cooldown_seconds=0.0)
    return QuotaPolicy(replace(params, **kw))


def test_weighted_fill_redistributes_unused_share() -> None:
    got = weighted_fill(50.0, {0: float("inf"), 1: 10.0}, {0: 64, 1: 64})
    assert got == {0: 40.0, 1: 10.0}
    assert weighted_fill(50.0, {0: float("inf"), 1: float("inf")}, {0: 32, 1: 96}) == {0: 12.5, 1: 37.5}


def test_fires_with_a_bounded_step_on_a_stalled_high_priority_pool() -> None:
    decision = policy().propose(signals())
    (proposal,) = decision.proposals
    assert proposal.kind == "set_vl_weights" and proposal.policy == "quota"
    (change,) = proposal.changes
    assert change.target == targets.VLARB_LOW and change.before == "0:64,1:64"
    after = targets.vl_weights(change.after)
    assert 0 < after[1] - 64 <= 32 and 0 < 64 - after[0] <= 32
    assert "share" in proposal.expected_effect
    assert {e.threshold for e in proposal.evidence} >= {0.2, 0.5, 0.05}


def test_does_not_fire_when_gpus_are_busy_or_ports_do_not_wait_or_link_is_free() -> None:
    assert policy().propose(signals(hi_util=0.9, hi_wait=0.06)).proposals == ()
    assert policy().propose(signals(hi_wait=0.0)).proposals == ()
    assert policy().propose(signals(uplink_congestion=0.05)).proposals == ()


def test_busy_gpus_whose_ports_are_held_back_still_count_as_stalled() -> None:
    # ports waiting 44% of the time: the all-reduce runs ~1.8x slower than alone, whatever the GPUs show
    assert policy().propose(signals(hi_util=0.9, hi_wait=0.44)).proposals
    assert policy(held_back_wait=0.5).propose(signals(hi_util=0.9, hi_wait=0.44)).proposals == ()


def test_weights_are_read_in_whole_packets_too() -> None:
    p = policy()
    exact = p.predict(100.0, {0: float("inf"), 1: float("inf")}, {0: 16, 1: 112})
    assert exact[1] == pytest.approx(100 * 128 / 192)  # 16 -> 64, 112 -> 128 a turn: the worse reading counts
    assert p.per_turn({0: 16, 1: 112, 2: 0}) == {0: 64, 1: 128, 2: 0}
    assert policy(arbitration_unit=1).per_turn({0: 16}) == {0: 16}


def test_saturated_wait_counter_on_a_busy_link_counts_as_congested() -> None:
    assert policy().propose(signals(uplink_congestion=None, saturated=True)).proposals
    assert policy().propose(signals(uplink_congestion=None, saturated=False)).proposals == ()


def test_never_starves_a_vl_and_stops_at_the_bound() -> None:
    p = policy()
    low = "0:64,1:64"
    for _ in range(20):
        decision = p.propose(signals(vlarb_low=low))
        if not decision.proposals:
            break
        low = decision.proposals[0].changes[0].after
        weights = targets.vl_weights(low)
        assert weights[0] / (weights[0] + weights[1]) >= 0.11 - 1e-9  # min share 0.1, 10% to spare
    assert not p.propose(signals(vlarb_low=low)).proposals


def _with_lo2(base: Signals) -> Signals:
    """`base` plus pool lo2 (rank 0, SL 0 like lo) whose hosts sit under the spine port `0xspine/1` along
    with lo's and hi's (the leaf uplink, acted on, carries hi and lo only)."""
    node = NodeSignals("node0003", ("lo2",), "allocated", 0.2, 1.0)
    spine = replace(
        base.links["0xleaf/5"], key="0xspine/1", desc="spine001", pools=("hi", "lo", "lo2"), utilization=0.95
    )  # less busy than the leaf uplink: the policy acts on the uplink
    assert base.qos is not None
    return replace(
        base,
        pools={**base.pools, "lo2": PoolSignals("lo2", 8, 8, 0, 0, 0.2, 1.0)},
        nodes={**base.nodes, node.name: node},
        links={**base.links, spine.key: spine},
        qos=replace(base.qos, pool_sl={**base.qos.pool_sl, "lo2": 0}),
    )


def test_the_floors_hold_on_every_switch_port_the_fabric_wide_table_reaches() -> None:
    p = policy()
    low = "0:64,1:64"
    for _ in range(20):
        decision = p.propose(_with_lo2(signals(vlarb_low=low)))
        if not decision.proposals:
            break
        low = decision.proposals[0].changes[0].after
    weights = targets.vl_weights(low)
    assert weights[1] > 64 and "0xleaf/5" in decision.notes[-1]  # hi was raised, acting on the uplink
    share = weights[0] / (weights[0] + weights[1])
    assert share >= 2 * 0.11 - 1e-9  # VL 0 carries lo and lo2 on the spine port: two floors there


def test_a_port_held_back_from_further_on_does_not_stand_for_the_fabric_s_throughput() -> None:
    # the spine port waits as much but sends 60% of its rate: back-pressure from the uplink, not a full
    # port; the floors are kept against what the uplink acted on sends (all of its rate)
    base = signals()
    spine = replace(base.links["0xleaf/5"], key="0xspine/1", desc="spine001", utilization=0.6)
    p, low = policy(), "0:64,1:64"
    for _ in range(20):
        view = replace(signals(vlarb_low=low), links={**base.links, spine.key: spine})
        decision = p.propose(view)
        if not decision.proposals:
            break
        low = decision.proposals[0].changes[0].after
    weights = targets.vl_weights(low)
    assert 0.11 - 1e-9 <= weights[0] / (weights[0] + weights[1]) < 0.11 / 0.6


def test_a_raise_may_reach_the_next_whole_packet() -> None:
    # 160 is sent as 3 packets a turn, like 192; hi needs more than 3:1, so the step goes to 4 packets
    # (193) although that is more than `max_step` (32) above 160.
    (proposal,) = policy().propose(signals(vlarb_low="0:24,1:160")).proposals
    after = targets.vl_weights(proposal.changes[0].after)
    assert after[1] >= 193 and after[0] / (after[0] + after[1]) >= 0.11 - 1e-9


def test_a_step_must_help_whether_or_not_a_quiet_vl_takes_its_share() -> None:
    p = policy()
    uplink = replace(signals().links["0xleaf/5"], vl_congestion={0: 0.5, 1: 0.4, 2: 0.0})
    assert p._satisfied(uplink, {0, 2}) == [2]  # VL 2 is read and does not wait
    assert p._satisfied(replace(uplink, vl_congestion={0: 0.5}), {0, 2}) == []  # not read: not known quiet
    assert p._gains((0.60, 0.50, 0.70, 0.50), (0.59, 0.50, 0.69, 0.50))  # more under one, less under none
    assert not p._gains((0.61, 0.50, 0.64, 0.50), (0.585, 0.50, 0.727, 0.50))  # less where VL 2 is quiet
    assert not p._gains((0.595, 0.50), (0.59, 0.50))  # under 1% more: not worth a change


def test_stops_once_the_weights_give_the_demand() -> None:
    # hi offers 0.5 / (1 - 0.44) = 0.89 of the link; 255:16 gives it 0.94.
    assert policy().propose(signals(vlarb_low="0:16,1:255")).proposals == ()


def test_same_vl_moves_the_port_group() -> None:
    (proposal,) = policy().propose(signals(hi_sl=0)).proposals
    assert proposal.kind == "set_port_group"
    (change,) = proposal.changes
    assert change.target == targets.port_group_sl("hi") and change.before == "0"
    assert change.after != "0"


def test_persistence_and_cooldown() -> None:
    p = policy(persistence_seconds=120.0, cooldown_seconds=600.0)
    first = p.propose(signals(at=NOW))
    assert first.proposals == () and first.state.first_seen
    second = p.propose(signals(at=NOW + 130), first.state)
    assert len(second.proposals) == 1
    third = p.propose(signals(at=NOW + 200), second.state)
    assert third.proposals == () and "cooling down" in " ".join(third.notes)
    assert p.propose(signals(at=NOW + 800), third.state).proposals
    calm = p.propose(signals(at=NOW + 140, hi_util=0.9, hi_wait=0.06), first.state)
    assert not any(k.startswith("stall:") for k in calm.state.first_seen)


def test_missing_signal_means_no_proposal() -> None:
    gone = Missing(LINKS, "stale: 900 s old")
    decision = policy().propose(signals(missing=(gone,)))
    assert decision.proposals == () and decision.missing == (gone,)


def test_surge_raises_the_class() -> None:
    p = policy(persistence_seconds=0.0)
    calm = signals(hi_util=0.9, hi_wait=0.06)
    state = p.propose(calm).state
    assert state.baseline_util["node0002"] == 0.2
    surged = replace(
        calm, nodes={**calm.nodes, "node0002": replace(calm.nodes["node0002"], gpu_utilization=0.8)}
    )
    kinds = [(x.kind, x.changes[0].target, x.changes[0].after) for x in p.propose(surged, QuotaState(
        {}, {}, state.baseline_util)).proposals]  # fmt: skip
    assert ("set_port_group", targets.port_group_sl("lo"), "1") in kinds
