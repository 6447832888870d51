"""The quota policy on constructed signals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from proposals import targets
from recommender.policies.quota import QuotaParams, QuotaPolicy, QuotaState, weighted_fill
from recommender.signals.model import LINKS, Missing
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
        assert weights[0] / (weights[0] + weights[1]) >= 0.1 - 1e-9
    assert not p.propose(signals(vlarb_low=low)).proposals


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
