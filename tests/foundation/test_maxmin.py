"""The one weighted max-min: the quota policy and the simulator share it, and it fills unweighted lanes
smallest demand first (issue: capacity 6, demands {VL0: 2, VL3: 10, VL5: 1}, only VL0 weighted)."""

from __future__ import annotations

import pytest

from foundation import maxmin
from recommender.policies import quota
from simulator.cluster import sharing
from simulator.cluster.sharing import Flow, allocate

CASE_DEMANDS = {0: 2.0, 3: 10.0, 5: 1.0}
CASE_WEIGHTS = {0: 64}


def test_unweighted_lanes_share_the_leftover_smallest_first() -> None:
    got = maxmin.weighted_fill(6.0, CASE_DEMANDS, CASE_WEIGHTS)
    assert got == pytest.approx({0: 2.0, 3: 3.0, 5: 1.0})
    assert sum(got.values()) == pytest.approx(6.0)  # nothing left unused while VL3 still wants more
    assert quota.weighted_fill(6.0, CASE_DEMANDS, CASE_WEIGHTS)[3] == pytest.approx(3.0)  # the policy's view


def test_policy_and_simulator_use_the_same_function() -> None:
    assert quota.weighted_fill is maxmin.weighted_fill
    assert sharing.weighted_fill is maxmin.weighted_fill
    assert sharing.water_level is maxmin.water_level


def test_the_simulator_gives_the_case_the_same_rates() -> None:
    flows = [Flow(1, (0,), 0, 2.0), Flow(2, (0,), 3, 10.0), Flow(3, (0,), 5, 1.0)]
    weights = [64, 0, 0, 0, 0, 0, 0, 0]
    allocate(flows, [6.0], weights)
    assert [f.rate for f in flows] == pytest.approx([2.0, 3.0, 1.0])


def test_weights_split_a_contended_link_and_leftovers_go_back() -> None:
    assert maxmin.weighted_fill(100.0, {0: 100.0, 1: 100.0}, {0: 64, 1: 192}) == pytest.approx(
        {0: 25.0, 1: 75.0}
    )
    assert maxmin.weighted_fill(100.0, {0: 100.0, 1: 30.0}, {0: 64, 1: 192}) == pytest.approx(
        {0: 70.0, 1: 30.0}
    )
    assert maxmin.weighted_fill(10.0, {0: maxmin.INF}, {}) == {0: 10.0}
    assert maxmin.water_level(90.0, [10.0, 100.0, 100.0]) == pytest.approx(40.0)
