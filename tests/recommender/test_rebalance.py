"""The rebalancing policy on hand-made views."""

from __future__ import annotations

from dataclasses import replace

import pytest

from recommender.policies.rebalance import (
    LEND,
    TAKEBACK,
    ClusterView,
    Loan,
    PoolSnapshot,
    RebalanceParams,
    RebalanceParamsError,
    RebalancePolicy,
)


def snap(
    name: str,
    capacity: int,
    allocated: int,
    pending: int = 0,
    *,
    lasting: int | None = None,
    peak: int | None = None,
    home: int | None = None,
    history: float = 10_000.0,
) -> PoolSnapshot:
    """A pool snapshot with whole-node idle counting (8 GPUs per node)."""
    return PoolSnapshot(
        name=name,
        home_gpus=capacity if home is None else home,
        capacity_gpus=capacity,
        allocated_gpus=allocated,
        pending_gpus=pending,
        idle_nodes=(capacity - allocated) // 8,
        pending_lasting_gpus=pending if lasting is None else lasting,
        demand_peak_gpus=allocated + pending if peak is None else peak,
        history_min=history,
    )


def view(
    *pools: PoolSnapshot,
    loans: tuple[Loan, ...] = (),
    last_lend_min: dict[str, float] | None = None,
    recent_lends: tuple[tuple[float, int], ...] = (),
    recent_takebacks: tuple[tuple[float, int], ...] = (),
) -> ClusterView:
    """A view at minute 100,000."""
    return ClusterView(100_000.0, 8, pools, loans, last_lend_min, recent_lends, recent_takebacks)


POLICY = RebalancePolicy(RebalanceParams(reserve_headroom=0.0))


def test_lends_idle_nodes_for_persistent_pending() -> None:
    moves = POLICY.propose(view(snap("busy", 16, 16, 20), snap("idle", 32, 8)))
    assert [(m.kind, m.from_pool, m.to_pool, m.home_pool, m.nodes) for m in moves] == [
        (LEND, "idle", "busy", "idle", 3)
    ]
    assert {e.signal for e in moves[0].evidence} == {"pending_gpus_lasting", "donor_spare_nodes"}


def test_no_lend_when_pending_did_not_persist() -> None:
    assert POLICY.propose(view(snap("busy", 16, 16, 20, lasting=0), snap("idle", 32, 8))) == []


def test_donor_keeps_its_recent_peak_and_headroom() -> None:
    assert POLICY.propose(view(snap("busy", 16, 16, 20), snap("idle", 32, 8, peak=32))) == []
    moves = RebalancePolicy(RebalanceParams(reserve_headroom=0.25)).propose(
        view(snap("busy", 16, 16, 20), snap("idle", 32, 8, peak=16))
    )
    assert sum(m.nodes for m in moves) == 1


def test_takes_back_when_owner_demand_returns() -> None:
    loans = (Loan("owner", "busy", 2),)
    moves = POLICY.propose(view(snap("busy", 32, 32, 8), snap("owner", 16, 16, 4, home=32), loans=loans))
    assert [(m.kind, m.from_pool, m.to_pool, m.nodes) for m in moves] == [(TAKEBACK, "busy", "owner", 1)]


def test_takeback_waits_for_the_owner_shortfall_to_persist() -> None:
    loans = (Loan("owner", "busy", 2),)
    owner = snap("owner", 16, 16, 12, home=32)
    brief = replace(owner, pending_recent_min_gpus=0)
    assert POLICY.propose(view(snap("busy", 32, 32, 8), brief, loans=loans)) == []
    lasting = replace(owner, pending_recent_min_gpus=4)
    moves = POLICY.propose(view(snap("busy", 32, 32, 8), lasting, loans=loans))
    assert [(m.kind, m.nodes) for m in moves] == [(TAKEBACK, 1)]  # only what lasted (4 GPUs)
    untracked = replace(owner, pending_recent_min_gpus=None)
    moves = POLICY.propose(view(snap("busy", 32, 32, 8), untracked, loans=loans))
    assert [(m.kind, m.nodes) for m in moves] == [(TAKEBACK, 2)]  # not tracked: recall at once


def test_an_owner_that_has_not_moved_lately_recalls_after_a_shorter_wait() -> None:
    loans = (Loan("owner", "busy", 2),)
    owner = replace(snap("owner", 16, 16, 12, home=32), pending_recent_min_gpus=0, pending_settled_min_gpus=4)
    moves = POLICY.propose(view(snap("busy", 32, 32, 8), owner, loans=loans))
    assert [(m.kind, m.nodes) for m in moves] == [(TAKEBACK, 1)]  # 4 GPUs lasted the settled window
    # The owner lent 30 minutes ago: a recall now could be a reversal, so the full window applies.
    recent = {"owner": 100_000.0 - 30.0}
    assert POLICY.propose(view(snap("busy", 32, 32, 8), owner, loans=loans, last_lend_min=recent)) == []
    assert RebalanceParams(takeback_persistence_min=2.0).settled_takeback_min == 2.0  # never the longer


def test_an_owner_idle_within_the_quiet_window_recalls_without_a_filter() -> None:
    loans = (Loan("owner", "busy", 2),)
    owner = snap("owner", 16, 16, 12, home=32)
    waiting = replace(owner, pending_recent_min_gpus=0, pending_settled_min_gpus=0)
    busy = snap("busy", 32, 32, 8)
    assert POLICY.propose(view(busy, replace(waiting, demand_quiet_min_gpus=4), loans=loans)) == []
    idle = replace(waiting, demand_quiet_min_gpus=0)  # no demand at some minute of the last hour
    [move] = POLICY.propose(view(busy, idle, loans=loans))
    assert (move.kind, move.nodes) == (TAKEBACK, 2)  # all 12 GPUs waiting now
    assert move.reason == "owner demand returned after an idle spell"
    assert move.evidence[-1].signal == "demand_gpus_min"
    # Within the cooldown a recall could be a reversal: the full filter applies, idle or not.
    recent = {"owner": 100_000.0 - 30.0}
    assert POLICY.propose(view(busy, idle, loans=loans, last_lend_min=recent)) == []
    off = RebalancePolicy(RebalanceParams(reserve_headroom=0.0, takeback_quiet_min=0.0))
    assert off.propose(view(busy, idle, loans=loans)) == []


def test_no_takeback_while_owner_fits() -> None:
    loans = (Loan("owner", "busy", 2),)
    assert POLICY.propose(view(snap("busy", 32, 32), snap("owner", 16, 10, home=32), loans=loans)) == []


def test_pool_with_lent_nodes_takes_back_instead_of_borrowing() -> None:
    loans = (Loan("owner", "other", 1),)
    moves = POLICY.propose(
        view(snap("owner", 8, 8, 16, home=16), snap("other", 24, 8), snap("idle", 32, 0), loans=loans)
    )
    assert [m.kind for m in moves] == [TAKEBACK]


def test_cooldown_stops_a_pool_that_just_moved_nodes_from_lending() -> None:
    pools = (snap("busy", 16, 16, 20), snap("idle", 32, 8))
    assert POLICY.propose(view(*pools, last_lend_min={"idle": 100_000.0 - 10})) == []
    assert POLICY.propose(view(*pools, last_lend_min={"idle": 100_000.0 - 61}))


def test_a_pool_still_waiting_may_borrow_again_once_its_nodes_have_landed() -> None:
    pools = (snap("busy", 16, 16, 20), snap("idle", 32, 8))
    assert POLICY.propose(view(*pools, last_lend_min={"busy": 100_000.0 - 10})) == []  # drain + 4 min
    assert POLICY.propose(view(*pools, last_lend_min={"busy": 100_000.0 - 16}))
    patient = RebalancePolicy(RebalanceParams(reserve_headroom=0.0, borrow_cooldown_min=60.0))
    assert patient.propose(view(*pools, last_lend_min={"busy": 100_000.0 - 16})) == []


def test_cooldown_covers_the_whole_reversal_window() -> None:
    # A move back exactly 60 minutes later counts as a reversal, so the cooldown must still hold then.
    pools = (snap("busy", 16, 16, 20), snap("idle", 32, 8))
    assert POLICY.propose(view(*pools, last_lend_min={"idle": 100_000.0 - 60})) == []


def test_nodes_promised_by_a_pending_lend_are_not_offered_again() -> None:
    pools = (snap("busy", 16, 16, 20), snap("idle", 64, 0))
    asked = sum(m.nodes for m in POLICY.propose(view(*pools)))
    assert asked == 3  # ceil(20 / 8)
    promised = replace(view(*pools), promised={"busy": 2})
    assert [(m.to_pool, m.nodes) for m in POLICY.propose(promised)] == [("busy", 1)]


def test_borrowed_idle_nodes_leave_before_the_donors_own() -> None:
    loans = (Loan("far", "idle", 1),)
    moves = POLICY.propose(
        view(snap("busy", 16, 16, 16), snap("idle", 40, 8), snap("far", 16, 0), loans=loans)
    )
    assert [(m.home_pool, m.nodes) for m in moves] == [("far", 1), ("idle", 1)]


def test_lend_budget_caps_recent_lends() -> None:
    params = RebalanceParams(reserve_headroom=0.0, lend_budget_per_pool_day=0.5, lend_budget_window_min=1440)
    pools = (snap("busy", 16, 16, 40), snap("idle", 64, 0))
    assert sum(m.nodes for m in RebalancePolicy(params).propose(view(*pools))) == 1
    spent = ((100_000.0 - 100, 1),)
    assert RebalancePolicy(params).propose(view(*pools, recent_lends=spent)) == []


def test_move_budget_counts_takebacks_and_stops_lends_not_takebacks() -> None:
    params = RebalanceParams(
        reserve_headroom=0.0,
        lend_budget_per_pool_day=10.0,
        lend_budget_window_min=1440,
        move_budget_per_pool_day=1.0,
        move_budget_window_min=1440,
    )
    policy = RebalancePolicy(params)
    pools = (snap("busy", 16, 16, 40), snap("idle", 64, 0))  # 2 pool-days: 2 moves a day
    assert sum(m.nodes for m in policy.propose(view(*pools))) == 2
    one_lend, one_back = ((100_000.0 - 100, 1),), ((100_000.0 - 50, 1),)
    assert sum(m.nodes for m in policy.propose(view(*pools, recent_takebacks=one_back))) == 1
    assert policy.propose(view(*pools, recent_lends=one_lend, recent_takebacks=one_back)) == []
    old = ((100_000.0 - 1440, 1),)  # outside the window
    assert sum(m.nodes for m in policy.propose(view(*pools, recent_lends=old, recent_takebacks=old))) == 2
    # An owner whose demand returned takes its node back even with the budget spent.
    owner = snap("owner", 8, 8, 16, home=16)
    moves = policy.propose(
        view(owner, snap("other", 24, 8), loans=(Loan("owner", "other", 1),), recent_takebacks=one_back * 2)
    )
    assert [(m.kind, m.nodes) for m in moves] == [(TAKEBACK, 1)]


def test_move_budget_window_grows_with_the_time_watched() -> None:
    params = RebalanceParams(
        reserve_headroom=0.0,
        lend_budget_per_pool_day=10.0,
        lend_budget_window_min=1440,
        move_budget_per_pool_day=1.0,
        move_budget_window_min=4 * 1440,
    )
    spent = ((100_000.0 - 2000, 3),)  # 3 nodes moved 1.4 days ago
    young = (snap("busy", 16, 16, 40, history=1440), snap("idle", 64, 0, history=1440))
    # Watched one day: the window is the lend window (1 day, 2 moves) and the old moves fall outside it.
    assert sum(m.nodes for m in RebalancePolicy(params).propose(view(*young, recent_lends=spent))) == 2
    older = tuple(replace(s, history_min=3 * 1440) for s in young)
    # Watched three days: 6 moves allowed over 3 days, 3 spent.
    assert sum(m.nodes for m in RebalancePolicy(params).propose(view(*older, recent_lends=spent))) == 3


def test_short_history_means_no_lending() -> None:
    assert POLICY.propose(view(snap("busy", 16, 16, 20), snap("idle", 32, 0, history=60.0))) == []


def test_params_report_every_problem() -> None:
    with pytest.raises(RebalanceParamsError) as err:
        RebalanceParams(persistence_min=0, cooldown_min=-1, max_nodes_per_move=0)
    assert "persistence_min" in str(err.value) and "cooldown_min" in str(err.value)
    assert "max_nodes_per_move" in str(err.value)
    with pytest.raises(RebalanceParamsError, match="unknown"):
        RebalanceParams.from_mapping({"nope": 1.0})
    assert RebalanceParams.from_mapping({"max_nodes_per_move": 3.0}).max_nodes_per_move == 3


def test_snapshot_from_raw_history_matches_the_window_aggregates() -> None:
    params = RebalanceParams(persistence_min=3, reserve_window_min=4, takeback_persistence_min=2)

    def from_raw(p: RebalanceParams) -> PoolSnapshot:
        return PoolSnapshot.from_history(
            "a", home_gpus=32, capacity_gpus=32, idle_nodes=1,
            allocated=[30, 8, 8, 8, 16, 16], pending=[0, 9, 4, 6, 5, 7], step_min=1.0, params=p,
        )  # fmt: skip

    pool = from_raw(params)
    assert (pool.allocated_gpus, pool.pending_gpus) == (16, 7)
    assert pool.pending_lasting_gpus == 5  # 0.2-quantile of the last 3 minutes at nearest rank: their min
    assert pool.demand_peak_gpus == 23  # max of allocated + pending over the last 4 minutes
    assert pool.history_min == 6.0
    assert pool.pending_recent_min_gpus == 5  # min of the last 2 minutes
    assert pool.pending_settled_min_gpus == 5  # the settled window is never longer (3 -> 2 minutes)
    settled = from_raw(replace(params, takeback_settled_persistence_min=1.0))
    assert settled.pending_settled_min_gpus == 7  # now only
    assert pool.demand_quiet_min_gpus == 12  # min demand over the quiet window (60 min: all 6 here)
    quiet = from_raw(replace(params, takeback_quiet_min=3.0))
    assert quiet.demand_quiet_min_gpus == 14  # min of 8 + 6, 16 + 5, 16 + 7
    untracked = from_raw(replace(params, takeback_quiet_min=0.0))
    assert untracked.demand_quiet_min_gpus is None  # off: not tracked
    assert from_raw(replace(params, reserve_window_min=120.0)).demand_peak_gpus == 30  # all 6: 30 + 0 first
    with pytest.raises(ValueError, match="same"):
        PoolSnapshot.from_history(
            "a",
            home_gpus=8,
            capacity_gpus=8,
            idle_nodes=0,
            allocated=[1],
            pending=[],
            step_min=1.0,
            params=params,
        )


def test_lasting_pending_forgives_a_brief_dip_but_not_a_flicker() -> None:
    params = RebalanceParams(persistence_min=10)

    def lasting(pending: list[int], quantile: float = 0.2) -> int:
        return PoolSnapshot.from_history(
            "a", home_gpus=16, capacity_gpus=16, idle_nodes=0, allocated=[16] * len(pending),
            pending=pending, step_min=1.0, params=replace(params, persistence_quantile=quantile),
        ).pending_lasting_gpus  # fmt: skip

    dip = [16, 16, 0, 16, 16, 16, 16, 16, 16, 16]
    assert lasting(dip) == 16  # one minute at 0 in ten: still lasting
    assert lasting([16, 0, 16, 16, 0, 16, 16, 16, 16, 16]) == 0  # 2 of 10 minutes at 0: not in 80% of them
    assert lasting(dip, quantile=0.0) == 0  # the strict rule: every minute
    with pytest.raises(RebalanceParamsError, match="persistence_quantile"):
        RebalanceParams(persistence_quantile=1.0)


def planned(pool: PoolSnapshot, demand: int, peak: int) -> PoolSnapshot:
    """The same pool with a time-of-day forecast (and quiet over the last few hours)."""
    return replace(
        pool, planned_demand_gpus=demand, planned_peak_gpus=peak, demand_recent_peak_gpus=pool.demand_gpus
    )


def test_a_donor_keeps_what_it_usually_reaches_within_the_hour() -> None:
    policy = RebalancePolicy(RebalanceParams(reserve_headroom=0.0, lend_budget_per_pool_day=10.0))
    busy = snap("busy", 16, 16, 40)
    quiet = snap("donor", 64, 0)  # quiet for 12 hours: 8 idle nodes, a reserve of 0
    assert sum(m.nodes for m in policy.propose(view(busy, quiet))) == 5
    rising = replace(quiet, likely_peak_gpus=40)  # but on most recent days it reached 40 within the hour
    assert sum(m.nodes for m in policy.propose(view(busy, rising))) == 3


def test_a_time_of_day_plan_borrows_before_anything_is_pending() -> None:
    day = planned(snap("day", 32, 16), demand=48, peak=48)
    night = planned(snap("night", 32, 0, peak=32), demand=0, peak=0)
    moves = POLICY.propose(view(day, night))
    assert [(m.kind, m.from_pool, m.to_pool, m.nodes) for m in moves] == [(LEND, "night", "day", 2)]
    assert moves[0].evidence[0].signal == "planned_demand_gpus"
    assert "time-of-day" in moves[0].reason


def test_without_a_plan_the_trailing_peak_still_locks_the_donor() -> None:
    day = planned(snap("day", 32, 16), demand=48, peak=48)
    night = snap("night", 32, 0, peak=32)  # no profile for the donor yet: its 12 h peak holds
    assert POLICY.propose(view(day, night)) == []
    # A donor whose coming hours were busy on some recent day keeps that peak.
    busy_later = planned(snap("night", 32, 0, peak=32), demand=0, peak=24)
    moves = POLICY.propose(view(day, busy_later))
    assert [(m.from_pool, m.nodes) for m in moves] == [("night", 1)]


def test_a_donor_quiet_at_this_hour_on_every_recent_day_lends_below_its_trailing_peak() -> None:
    busy = snap("busy", 32, 32, 16)
    donor = snap("donor", 32, 0, peak=32)
    assert POLICY.propose(view(busy, donor)) == []
    quiet = planned(donor, demand=0, peak=0)
    moves = POLICY.propose(view(busy, quiet))
    assert [(m.kind, m.from_pool, m.nodes) for m in moves] == [(LEND, "donor", 2)]
    assert moves[0].evidence[0].signal == "pending_gpus_lasting"
    # ... but not when it was busy in the last few hours,
    assert POLICY.propose(view(busy, replace(quiet, demand_recent_peak_gpus=32))) == []
    # nor while it is cooling down (the caller starts a cooldown after a take-back too).
    assert POLICY.propose(view(busy, quiet, last_lend_min={"donor": 100_000.0 - 30})) == []


def test_an_owner_takes_its_nodes_back_ahead_of_its_shift() -> None:
    night = planned(snap("night", 16, 0, home=32), demand=32, peak=32)
    day = snap("day", 48, 40, home=32)
    moves = POLICY.propose(view(night, day, loans=(Loan("night", "day", 2),)))
    assert [(m.kind, m.from_pool, m.to_pool, m.nodes) for m in moves] == [(TAKEBACK, "day", "night", 2)]
    assert moves[0].evidence[0].signal == "planned_demand_gpus"


def test_plan_parameters_are_checked() -> None:
    assert RebalanceParams(plan_days=0).profile_params() is None
    with pytest.raises(RebalanceParamsError, match="plan"):
        RebalanceParams(plan_days=3, plan_min_days=5)
