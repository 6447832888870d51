"""The rebalancing planner on hand-made views (outlooks stubbed: what the forecast says is given)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from recommender.policies.rebalance import (
    BUDGET,
    LEND,
    PROTECTION,
    RECLAIM,
    TAKEBACK,
    VALUE,
    ClusterView,
    Loan,
    MoveRecord,
    PoolSnapshot,
    RebalanceParams,
    RebalanceParamsError,
    RebalancePolicy,
)

NOW = 100_000.0
DAY = 1440.0


@dataclass
class Stub:
    """An outlook that answers what it is told: `rate` as a taker's use, `idle_min` (and `missed`, when
    the end is foreseen) as a donor's idle span, `rises` over `busy` demand minutes."""

    rate: float = 8.0
    idle_min: float = 3 * DAY
    missed: int | None = None
    rises_seen: int = 0
    busy: int = 10_000
    watched: float = 10 * DAY
    soon: int = 0
    recent: float | None = None

    def use(self, level: int, width: int, horizon_min: float) -> float:
        return min(self.rate, width)

    def idle(self, level: int) -> tuple[float, int | None]:
        return self.idle_min, self.missed

    def rises(self, level: int, horizon_min: float) -> tuple[int, int, float]:
        return self.rises_seen, self.busy, min(self.watched, 7 * DAY)

    def busy_minutes(self) -> int:
        return self.busy

    @property
    def watched_min(self) -> float:
        return self.watched

    def demand_soon(self) -> int:
        return self.soon

    def recent_weight(self) -> float | None:
        return self.recent


def pool(
    name: str, capacity: int, allocated: int, pending: int = 0, outlook: Stub | None = None
) -> PoolSnapshot:
    """A pool of whole 8-GPU nodes."""
    return PoolSnapshot(
        name, capacity, capacity, allocated, pending, (capacity - allocated) // 8, outlook or Stub()
    )


def view(
    *pools: PoolSnapshot,
    loans: tuple[Loan, ...] = (),
    moves: tuple[MoveRecord, ...] = (),
    started: float | None = NOW - 10 * DAY,
    plan: bool = True,
) -> ClusterView:
    """A view at NOW; by default the budget has been filling for ten days (a full bucket)."""
    return ClusterView(NOW, 8, pools, loans, moves, started, None, plan)


POLICY = RebalancePolicy()
FILL = tuple(pool(f"q{i:02d}", 8, 8) for i in range(14))  # 14 more full pools: 16 pools, 8 tokens a day


def test_lends_an_idle_node_for_the_expected_loan_with_its_evidence() -> None:
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0)))
    assert [(m.kind, m.from_pool, m.to_pool, m.home_pool, m.nodes) for m in moves] == [
        (LEND, "idle", "busy", "idle", 1)
    ]
    evidence = {e.signal: e for e in moves[0].evidence}
    assert evidence["taker_use_rate_gpus"].value == 8.0  # the forecast over the loan
    assert evidence["taker_forecast_recent_weight"].value == 0.0  # not blended: no forecast scored yet
    assert evidence["donor_idle_min"].value == 3 * DAY  # the loan expected
    assert evidence["donor_rises"].value == 0 and evidence["donor_rises"].threshold > 0
    assert evidence["donor_takeback_wait_min"].value == 11.0  # a drain costs it least (nothing is lost)
    assert evidence["expected_value_gpu_minutes"].value == pytest.approx(8 * (3 * DAY - 11))  # the value
    assert evidence["move_budget_tokens"].value == pytest.approx(0.0)  # budget left: a full bucket (2) - 2


def test_the_evidence_shows_how_much_the_last_hour_weighed_in_the_takers_forecast() -> None:
    moves = POLICY.propose(view(pool("busy", 16, 16, 8, Stub(recent=0.625)), pool("idle", 32, 0)))
    evidence = {e.signal: e for e in moves[0].evidence}
    assert evidence["taker_forecast_recent_weight"].value == 0.625
    assert evidence["taker_forecast_recent_weight"].window_min == RebalanceParams().history_min


def test_a_donor_that_rises_expects_a_loan_of_the_mean_spacing_of_its_rises() -> None:
    """Seven rises in a week: a loan is expected to last a day (the mean spacing), however recently the
    demand fell; with no rise at that level, as long as it has already been idle (persistence)."""
    rising = pool("idle", 32, 0, 0, Stub(idle_min=120.0, rises_seen=7))
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), rising))
    assert {e.signal: e.value for e in moves[0].evidence}["donor_idle_min"] == pytest.approx(DAY)
    quiet = pool("idle", 32, 0, 0, Stub(idle_min=120.0))
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), quiet))
    assert {e.signal: e.value for e in moves[0].evidence}["donor_idle_min"] == pytest.approx(120.0)


def test_asks_for_as_many_nodes_as_the_shortfall_and_no_more() -> None:
    moves = POLICY.propose(view(pool("busy", 16, 16, 20), pool("idle", 64, 0), *FILL))
    assert sum(m.nodes for m in moves) == 3  # 20 GPUs waiting: 3 nodes


def test_a_loan_expected_to_end_within_the_reversal_window_and_a_takebacks_lead_is_not_made() -> None:
    """A loan must outlast the reversal window by its take-back's lead (3 minutes for a reclaim, 11 for a
    drain)."""
    policy = RebalancePolicy()
    short = pool("idle", 32, 0, 0, Stub(idle_min=60.0 + 2.0))
    assert policy.propose(view(pool("busy", 16, 16, 8), short)) == []
    assert policy.blocked == {"busy": PROTECTION}
    for idle, wait in ((60.0 + 3.0, 3.0), (60.0 + 11.0, 11.0)):
        ok = pool("idle", 32, 0, 0, Stub(idle_min=idle))
        moves = policy.propose(view(pool("busy", 16, 16, 8), ok))
        assert len(moves) == 1
        assert {e.signal: e.value for e in moves[0].evidence}["donor_takeback_wait_min"] == wait


def test_a_taker_that_would_not_use_the_node_gets_nothing() -> None:
    policy = RebalancePolicy()
    assert policy.propose(view(pool("busy", 16, 16, 8, Stub(rate=0.0)), pool("idle", 32, 0))) == []
    assert policy.blocked == {"busy": VALUE}


def test_the_token_price_rises_as_the_budget_runs_low() -> None:
    short = pool("idle", 32, 0, 0, Stub(idle_min=100.0))  # worth 8 x 89 = 712 GPU-min: 356 per token
    full = view(pool("busy", 16, 16, 8), short, *FILL)
    assert len(RebalancePolicy().propose(full)) == 1  # a full bucket: any value is worth a token
    # a quarter of the bucket (2 of 8 tokens): a token must buy 45 minutes of a node's work (360 GPU-min)
    low = replace(full, started_min=NOW - 0.25 * DAY)
    assert RebalancePolicy().propose(low) == []
    longer = pool("idle", 32, 0, 0, Stub(idle_min=300.0))
    assert len(RebalancePolicy().propose(replace(low, pools=(low.pools[0], longer, *FILL)))) == 1


def test_the_token_price_follows_what_tokens_have_been_buying() -> None:
    """After a day of offers worth days of a node, an offer worth hours waits for a fuller bucket."""
    policy = RebalancePolicy()
    days = pool("idle", 32, 0, 0, Stub(idle_min=5 * DAY))
    for k in range(5):  # earlier planning calls, each offered a loan of days
        policy._remember_offer(NOW - 600 + 100 * k, 8 * (5 * DAY - 11) / 2)
    hours = pool("idle", 32, 0, 0, Stub(idle_min=600.0))
    three_quarters = view(pool("busy", 16, 16, 8), hours, *FILL, started=NOW - 0.75 * DAY)
    assert policy.propose(three_quarters) == []
    assert len(RebalancePolicy().propose(three_quarters)) == 1  # without that memory it buys
    assert len(policy.propose(replace(three_quarters, pools=(three_quarters.pools[0], days, *FILL)))) == 1


def test_the_budget_starts_empty_and_fills_at_the_paced_rate() -> None:
    pools = (pool("busy", 16, 16, 8), pool("idle", 32, 0))
    policy = RebalancePolicy()
    fresh = view(*pools, started=NOW)
    assert policy.budget_left(fresh) == 0.0
    assert policy.propose(fresh) == [] and policy.blocked == {"busy": BUDGET}
    # 2 pools x 0.5 moves a day: one token a day; a lend from home costs two, the bucket holds two
    assert policy.budget_left(view(*pools, started=NOW - 1.5 * DAY)) == pytest.approx(1.5)
    assert policy.propose(view(*pools, started=NOW - 1.5 * DAY)) == []
    assert policy.budget_left(view(*pools, started=NOW - 5 * DAY)) == pytest.approx(2.0)
    wide = (*pools, *(pool(f"q{i}", 8, 8) for i in range(6)))  # 8 pools: four tokens a day, four at most
    assert policy.budget_left(view(*wide, started=NOW - 5 * DAY)) == pytest.approx(4.0)
    assert sum(m.nodes for m in policy.propose(view(*wide, started=NOW - DAY))) == 1


def test_moves_spend_tokens_lend_two_onward_one_takeback_none() -> None:
    assert MoveRecord(0, "a", "b", "a", 3).tokens == 6
    assert MoveRecord(0, "b", "c", "a", 2).tokens == 2
    assert MoveRecord(0, "b", "a", "a", 2).tokens == 0
    pools = tuple(pool(f"p{i}", 8, 8) for i in range(16))  # 8 tokens a day
    spent = (MoveRecord(NOW - 60, "p0", "p1", "p0", 3),)  # 6 tokens an hour ago
    left = POLICY.budget_left(view(*pools, moves=spent))
    assert left == pytest.approx(8 - 6 + 8 * 60 / DAY)


def test_a_donor_lends_only_while_its_rises_fit_its_wait_allowance() -> None:
    """10,000 demand minutes allow 1% of waiting: 100 minutes, nine drains of 11 minutes or 33 reclaims of
    3; of the take-backs it can afford, the loan is valued with the cheaper one (a drain costs the owner 88
    GPU-minutes of waiting, a reclaim 24 plus the 240 its holder's work on the node loses)."""
    for donor in (Stub(rises_seen=34), Stub(idle_min=59.0)):
        policy = RebalancePolicy()
        assert policy.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, donor))) == []
        assert policy.blocked == {"busy": PROTECTION}
    for rises, wait in ((9, 11.0), (10, 3.0), (33, 3.0)):
        ok = Stub(rises_seen=rises)
        moves = POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, ok)))
        evidence = {e.signal: e for e in moves[0].evidence}
        assert evidence["donor_takeback_wait_min"].value == wait
        assert evidence["donor_rises"].threshold == pytest.approx(100 / wait, abs=1e-3)
        loan = 7 * DAY / rises  # the spacing of its rises: one take-back expected per loan
        assert evidence["donor_idle_min"].value == pytest.approx(loan, abs=0.1)
        cost = 8 * 11 if wait == 11.0 else 8 * 3 + 8 * 30
        value = 8 * (loan - 11) - cost
        assert evidence["expected_value_gpu_minutes"].value == pytest.approx(value, abs=0.1)


def test_a_sparse_donor_lends_nothing_and_a_never_used_one_lends() -> None:
    """Demand in 1% of the minutes seen: a week of them (100 minutes) cannot absorb even one reclaim's wait
    (3 minutes: a pool needs demand in 3% of its minutes); in 3.2% it can, though not a drain's (11%)."""
    sparse = Stub(busy=144, watched=10 * DAY)
    policy = RebalancePolicy()
    assert policy.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, sparse))) == []
    assert policy.blocked == {"busy": PROTECTION}
    thin = pool("idle", 32, 0, 0, Stub(busy=460, watched=10 * DAY))
    assert policy.sparse(thin, 11.0) and not policy.sparse(thin)
    moves = policy.propose(view(pool("busy", 16, 16, 8), thin))
    assert {e.signal: e.value for e in moves[0].evidence}["donor_takeback_wait_min"] == 3.0
    dense = Stub(busy=1600, watched=10 * DAY)  # 11% of the minutes: 11 minutes of allowance a week
    assert len(POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, dense)))) == 1
    never = Stub(busy=0)  # no demand at all over the window: the slow lane lends
    assert len(POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, never)))) == 1


def test_with_a_history_too_short_to_judge_an_allowance_no_pool_is_sparse() -> None:
    """Compressed timings (the demo: an hour of history, 3-minute drains): 1% of even a fully busy hour
    cannot absorb a drain, so the allowance judges nobody sparse and admits no rise."""
    short = RebalancePolicy(RebalanceParams(cycle_min=1, drain_min=3, reversal_min=10, history_min=60))
    thin = Stub(idle_min=30.0, busy=5, watched=60.0)
    pools = (pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, thin), *FILL)
    assert not short.sparse(pools[1])
    assert len(short.propose(view(*pools))) == 1
    risen = Stub(idle_min=30.0, busy=5, watched=60.0, rises_seen=1)
    assert short.propose(view(pools[0], pool("idle", 32, 0, 0, risen), *FILL)) == []


def test_a_sparse_owner_that_wakes_up_reclaims_all_its_nodes() -> None:
    """Its burst is of unknown size and its allowance absorbs no drain: every node comes home at once."""
    owner = pool("owner", 8, 1, 0, Stub(busy=30, watched=3 * DAY))  # one GPU wanted; three nodes away
    loans = (Loan("owner", "b", 2), Loan("owner", "c", 1))
    moves = POLICY.propose(view(owner, pool("b", 32, 16), pool("c", 24, 16), loans=loans))
    assert sorted((m.kind, m.from_pool, m.nodes) for m in moves) == [(RECLAIM, "b", 2), (RECLAIM, "c", 1)]
    dense = pool("owner", 8, 1, 0, Stub(busy=2000, watched=3 * DAY))  # fits its one node: keeps lending
    assert POLICY.propose(view(dense, pool("b", 32, 16), pool("c", 24, 16), loans=loans)) == []


def test_a_foreseen_loan_counts_only_the_rises_its_forecast_missed() -> None:
    """A donor whose profile foresees its demand: its rises are recalled in time, only the misses risk a
    wait."""
    seen = Stub(idle_min=600.0, missed=0, rises_seen=50)
    assert len(POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, seen)))) == 1
    missed = Stub(idle_min=600.0, missed=34, rises_seen=0)  # more than even 33 reclaims would absorb
    assert POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, missed))) == []


def test_the_slow_lane_donor_idle_for_days_goes_first() -> None:
    days = pool("slow", 16, 0, 0, Stub(idle_min=5 * DAY))
    hours = pool("fast", 16, 0, 0, Stub(idle_min=120.0))
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), hours, days))
    assert [(m.from_pool, m.nodes) for m in moves] == [("slow", 1)]


def test_at_equal_value_the_donor_with_fewer_nodes_away_goes_first() -> None:
    """One wake-up recalls all of a donor's nodes at once: equal loans are spread over donors."""
    a, b = pool("a", 32, 0, 0, Stub(busy=0)), pool("b", 32, 0, 0, Stub(busy=0))
    moves = POLICY.propose(view(pool("busy", 16, 16, 16), a, b, *FILL, loans=(Loan("a", "q00", 1),)))
    assert next((m.from_pool, m.nodes) for m in moves) == ("b", 1)


def test_never_moves_nodes_back_within_the_reversal_window() -> None:
    just = (MoveRecord(NOW - 30, "busy", "idle", "busy", 1),)  # busy sent a node to idle 30 min ago
    pools = (pool("busy", 16, 16, 8), pool("idle", 40, 0), *FILL)
    policy = RebalancePolicy()
    assert policy.propose(view(*pools, moves=just)) == []
    later = (MoveRecord(NOW - 61, "busy", "idle", "busy", 1),)
    assert len(policy.propose(view(*pools, moves=later))) == 1


def test_takes_back_when_the_owner_needs_its_nodes_even_with_no_budget() -> None:
    """The node is idle at its holder: a reclaim requeues nothing and spares the owner a drain's wait."""
    owner = pool("a", 8, 8, 8)  # its second node is at b
    holder = pool("b", 24, 8)
    loans = (Loan("a", "b", 1),)
    moves = POLICY.propose(view(owner, holder, loans=loans, started=NOW))
    assert [(m.kind, m.from_pool, m.to_pool, m.nodes) for m in moves] == [(RECLAIM, "b", "a", 1)]
    evidence = {e.signal: e for e in moves[0].evidence}
    assert set(evidence) == {
        "owner_shortfall_gpus",
        "move_budget_tokens",
        "reclaim_requeued_gpus",
        "reclaim_lost_gpu_minutes",
    }
    assert evidence["reclaim_requeued_gpus"].value == 0.0
    assert evidence["reclaim_lost_gpu_minutes"].threshold == 8 * (11 - 3)  # the owner's waiting spared
    assert moves[0].reason.startswith("owner demand returned; reclaim: requeues the jobs")


@pytest.mark.parametrize(("running", "kind"), [(2, RECLAIM), (3, TAKEBACK), (8, TAKEBACK)])
def test_a_busy_node_is_reclaimed_only_when_the_owners_wait_costs_more_than_the_work_lost(
    running: int, kind: str
) -> None:
    """8 GPUs waiting 8 minutes longer for a drain (64 GPU-minutes) against 30 minutes of work for each GPU
    the holder runs on the node: 2 GPUs (60) are requeued, 3 (90) are left to end under a drain."""
    owner = pool("a", 8, 8, 8)
    holder = pool("b", 16, 8 + running)  # two nodes, one of them a's: the holder's work spills onto it
    moves = POLICY.propose(view(owner, holder, loans=(Loan("a", "b", 1),), started=NOW))
    assert [(m.kind, m.nodes) for m in moves] == [(kind, 1)]
    if kind == RECLAIM:
        evidence = {e.signal: e.value for e in moves[0].evidence}
        assert evidence["reclaim_requeued_gpus"] == running
        assert evidence["reclaim_lost_gpu_minutes"] == running * 30


def test_an_owner_whose_allowance_cannot_absorb_a_drain_reclaims_even_a_busy_node() -> None:
    """Ten rises of its demand over its capacity in 10,000 demand minutes: more than the nine drains its
    wait allowance absorbs, so the holder's work is requeued rather than the owner kept waiting."""
    owner = pool("a", 8, 8, 8, Stub(rises_seen=10))
    holder = pool("b", 16, 16)
    moves = POLICY.propose(view(owner, holder, loans=(Loan("a", "b", 1),), started=NOW))
    assert [(m.kind, m.nodes) for m in moves] == [(RECLAIM, 1)]
    assert "the owner's wait allowance cannot absorb a drain" in moves[0].reason
    assert {e.signal: e.value for e in moves[0].evidence}["reclaim_lost_gpu_minutes"] == 8 * 30


def test_a_shortfall_of_one_node_reclaims_one_and_drains_the_rest_of_a_sparse_owners_burst_never() -> None:
    """An owner short 8 GPUs with two nodes at an idle holder and a third due: only the GPUs wanted now are
    worth a reclaim; nodes recalled ahead of a forecast go by drain."""
    owner = pool("a", 8, 8, 8, Stub(soon=40))  # 8 waiting now, 40 due: four nodes wanted, three away
    loans = (Loan("a", "b", 3),)
    moves = POLICY.propose(view(owner, pool("b", 40, 0), loans=loans, started=NOW))
    assert sorted((m.kind, m.nodes) for m in moves) == [(RECLAIM, 1), (TAKEBACK, 2)]


def test_without_a_faster_reclaim_every_takeback_drains() -> None:
    slow = RebalancePolicy(RebalanceParams(reclaim_min=11.0))
    moves = slow.propose(view(pool("a", 8, 8, 8), pool("b", 24, 8), loans=(Loan("a", "b", 1),), started=NOW))
    assert [m.kind for m in moves] == [TAKEBACK]
    thin = pool("idle", 32, 0, 0, Stub(busy=460, watched=10 * DAY))  # sparse for a drain: lends nothing
    assert slow.propose(view(pool("busy", 16, 16, 8), thin)) == []


def test_no_takeback_of_a_loan_younger_than_the_reversal_window() -> None:
    """Nor a reclaim: an owner that cannot absorb a drain's wait still waits out the reversal window."""
    owner, holder = pool("a", 8, 8, 8, Stub(rises_seen=50)), pool("b", 24, 8)
    loans = (Loan("a", "b", 1),)
    recent = (MoveRecord(NOW - 59, "a", "b", "a", 1),)
    assert POLICY.propose(view(owner, holder, loans=loans, moves=recent)) == []
    older = (MoveRecord(NOW - 61, "a", "b", "a", 1),)
    assert len(POLICY.propose(view(owner, holder, loans=loans, moves=older))) == 1


def test_no_takeback_while_the_owner_fits_unless_its_demand_is_due_before_a_node_could_arrive() -> None:
    loans = (Loan("a", "b", 1), Loan("a", "c", 1))
    assert POLICY.propose(view(pool("a", 8, 4), pool("b", 24, 8), pool("c", 24, 8), loans=loans)) == []
    due = pool("a", 8, 4, 0, Stub(soon=24))  # 24 GPUs due: both nodes, recalled before it comes
    moves = POLICY.propose(view(due, pool("b", 24, 8), pool("c", 24, 8), loans=loans))
    assert sum(m.nodes for m in moves if m.kind == TAKEBACK) == 2  # ahead of the need: by drain
    assert moves[0].reason == "owner demand due before a node could arrive"


def test_a_pool_with_nodes_away_takes_back_instead_of_borrowing() -> None:
    loans = (Loan("a", "b", 1),)
    moves = POLICY.propose(view(pool("a", 8, 8, 8), pool("b", 24, 24), pool("c", 32, 0), loans=loans))
    assert all(m.kind != LEND or m.to_pool != "a" for m in moves)


def test_borrowed_idle_nodes_go_onward_before_the_donors_own_and_cost_one_token() -> None:
    holder = pool("h", 24, 0, 0, Stub(rate=0.0))  # one of its three nodes is a's; it would not use it
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), holder, pool("a", 8, 8), loans=(Loan("a", "h", 1),)))
    assert [(m.from_pool, m.to_pool, m.home_pool) for m in moves] == [("h", "busy", "a")]
    assert {e.signal: e.threshold for e in moves[0].evidence}["move_budget_tokens"] == 1.0


def test_a_holder_that_would_use_a_borrowed_node_does_not_send_it_onward() -> None:
    """It cannot recall a node it does not own: the use it would lose is charged to the onward loan."""
    holder = pool("h", 24, 16, 0, Stub(rate=8.0))  # its borrowed node is idle now, needed over the loan
    loans = (Loan("a", "h", 1),)
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), holder, pool("a", 8, 8), loans=loans))
    assert all(m.home_pool != "a" for m in moves)


def test_outside_a_planning_cycle_only_takebacks() -> None:
    pools = (pool("busy", 16, 16, 8), pool("idle", 32, 0))
    assert POLICY.propose(view(*pools, plan=False)) == []


def test_params_report_every_problem() -> None:
    with pytest.raises(RebalanceParamsError) as err:
        RebalanceParams(cycle_min=0, wait_quantile=1.0, history_min=10.0)
    text = str(err.value)
    assert "cycle_min must be > 0" in text and "wait_quantile must be < 1" in text
    assert "history_min must be >= reversal_min" in text
    with pytest.raises(RebalanceParamsError, match="unknown parameters: persistence_min"):
        RebalanceParams.from_mapping({"persistence_min": 60})
    # six planner constants and the two physical figures of a reclaim (docs/backtest.md, constants)
    assert len(RebalanceParams().as_dict()) <= 8
