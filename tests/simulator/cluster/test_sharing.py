"""Weighted max-min sharing: per-VL weights, redistribution of unused share, no starvation."""

from __future__ import annotations

import pytest

from simulator.cluster.sharing import INF, Flow, allocate, water_level, weighted_fill

WEIGHTS = (64, 192, 0, 0, 0, 0, 0, 0)  # VL1 has three times VL0's weight


def test_weighted_fill_gives_shares_by_weight_under_contention() -> None:
    alloc = weighted_fill(100.0, {0: 100.0, 1: 100.0}, dict(enumerate(WEIGHTS)))
    assert alloc == pytest.approx({0: 25.0, 1: 75.0})


def test_weighted_fill_redistributes_what_a_vl_does_not_use() -> None:
    alloc = weighted_fill(100.0, {0: 100.0, 1: 30.0}, dict(enumerate(WEIGHTS)))
    assert alloc == pytest.approx({0: 70.0, 1: 30.0})


def test_weight_zero_vl_gets_only_leftovers_and_weighted_vls_never_starve() -> None:
    weights = {0: 1, 1: 255}
    alloc = weighted_fill(100.0, {0: INF, 1: INF, 2: INF}, weights)
    assert alloc[0] > 0 and alloc[1] > alloc[0]
    assert alloc[2] == 0.0
    assert weighted_fill(100.0, {1: 40.0, 2: INF}, weights)[2] == pytest.approx(60.0)


def test_water_level() -> None:
    assert water_level(90.0, [10.0, 100.0, 100.0]) == pytest.approx(40.0)
    assert water_level(90.0, [10.0, 20.0]) == INF


def test_two_vls_on_one_congested_link() -> None:
    flows = [Flow(1, (0,), 0, 80.0), Flow(2, (0,), 1, 80.0)]
    allocate(flows, [100.0], WEIGHTS)
    assert flows[0].rate == pytest.approx(25.0)
    assert flows[1].rate == pytest.approx(75.0)
    assert flows[0].bottleneck == 0 and flows[1].bottleneck == 0


def test_unused_share_goes_to_the_other_vl() -> None:
    flows = [Flow(1, (0,), 0, 80.0), Flow(2, (0,), 1, 40.0)]
    allocate(flows, [100.0], WEIGHTS)
    assert flows[1].rate == pytest.approx(40.0)
    assert flows[1].bottleneck == -1
    assert flows[0].rate == pytest.approx(60.0)


def test_flows_inside_a_vl_share_the_vl_equally() -> None:
    flows = [Flow(1, (0,), 1, 100.0), Flow(2, (0,), 1, 100.0), Flow(3, (0,), 0, 100.0)]
    allocate(flows, [100.0], WEIGHTS)
    assert [f.rate for f in flows] == pytest.approx([37.5, 37.5, 25.0])


def test_max_min_across_links_gives_spare_capacity_to_unconstrained_flows() -> None:
    # Flow 1 crosses links 0 and 1; flow 2 only link 0; flows 3 and 4 only link 1 (same VL everywhere).
    flows = [
        Flow(1, (0, 1), 0, 100.0),
        Flow(2, (0,), 0, 100.0),
        Flow(3, (1,), 0, 100.0),
        Flow(4, (1,), 0, 100.0),
    ]
    allocate(flows, [100.0, 90.0], WEIGHTS)
    assert [f.rate for f in flows] == pytest.approx([30.0, 70.0, 30.0, 30.0], rel=1e-3)
    assert sum(f.rate for f in flows if 1 in f.channels) <= 90.0 + 1e-6


def test_flows_of_one_job_move_in_lock_step() -> None:
    flows = [Flow(1, (0,), 0, 80.0), Flow(1, (1,), 0, 80.0), Flow(2, (0,), 0, 80.0)]
    allocate(flows, [100.0, 100.0], WEIGHTS)
    assert flows[0].rate == flows[1].rate == pytest.approx(50.0)
    assert flows[2].rate == pytest.approx(50.0)


def test_a_down_channel_stalls_the_whole_job() -> None:
    flows = [Flow(1, (0,), 0, 80.0), Flow(1, (1,), 0, 80.0)]
    allocate(flows, [100.0, 0.0], WEIGHTS)
    assert flows[0].rate == flows[1].rate == 0.0
    assert flows[1].bottleneck == 0
