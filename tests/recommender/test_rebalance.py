"""The rebalancing planner on hand-made views (outlooks stubbed: what the forecast says is given)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from recommender.policies.rebalance import (
    BUDGET,
    LEND,
    PROTECTION,
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
    """An outlook that answers what it is told: (rate, lasted) as a taker, (idle, tail) as a donor."""

    rate: float = 8.0
    lasted: float = 600.0
    idle_min: float = 3 * DAY
    tail: float = 0.0
    soon: bool = False
    busy: int = 10_000

    def shortfall(self, level: int, width: int) -> tuple[float, float]:
        return min(self.rate, width), self.lasted

    def idle(self, level: int) -> tuple[float, float]:
        return self.idle_min, self.tail

    def needs_soon(self, level: int) -> bool:
        return self.soon

    def busy_minutes(self) -> int:
        return self.busy


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


def test_lends_an_idle_node_for_a_lasting_shortfall_with_its_evidence() -> None:
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0)))
    assert [(m.kind, m.from_pool, m.to_pool, m.home_pool, m.nodes) for m in moves] == [
        (LEND, "idle", "busy", "idle", 1)
    ]
    evidence = {e.signal: e for e in moves[0].evidence}
    assert evidence["taker_shortfall_rate_gpus"].value == 8.0  # the forecast
    assert evidence["taker_shortfall_lasted_min"].value == 600.0
    assert evidence["expected_value_gpu_minutes"].value == pytest.approx(8 * (600 - 11))  # the value
    assert evidence["move_budget_tokens"].value == pytest.approx(0.0)  # budget left: a full bucket (2) - 2


def test_asks_for_as_many_nodes_as_the_shortfall_and_no_more() -> None:
    moves = POLICY.propose(view(pool("busy", 16, 16, 20), pool("idle", 64, 0), *FILL))
    assert sum(m.nodes for m in moves) == 3  # 20 GPUs waiting: 3 nodes


def test_a_shortfall_younger_than_the_drain_is_worth_nothing() -> None:
    young = Stub(lasted=10.0)
    policy = RebalancePolicy()
    assert policy.propose(view(pool("busy", 16, 16, 8, young), pool("idle", 32, 0))) == []
    assert policy.blocked == {"busy": VALUE}


def test_the_token_price_rises_as_the_budget_runs_low() -> None:
    short = Stub(lasted=50.0)  # worth 8 x 39 = 312 GPU-min: 156 per token
    full = view(pool("busy", 16, 16, 8, short), pool("idle", 32, 0), *FILL)
    assert len(POLICY.propose(full)) == 1  # a full bucket: any value is worth a token
    # half a day of budget: a token must buy 240 GPU-minutes
    half = replace(full, started_min=NOW - 0.5 * DAY)
    assert POLICY.propose(half) == []
    long = view(
        pool("busy", 16, 16, 8, Stub(lasted=200.0)), pool("idle", 32, 0), *FILL, started=NOW - DAY / 2
    )
    assert len(POLICY.propose(long)) == 1


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


def test_a_donor_keeps_what_it_needed_recently_or_in_its_tail() -> None:
    for donor in (Stub(idle_min=59.0), Stub(tail=0.02)):
        policy = RebalancePolicy()
        assert policy.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, donor))) == []
        assert policy.blocked == {"busy": PROTECTION}
    ok = Stub(idle_min=61.0, tail=0.009)
    assert len(POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, ok)))) == 1


def test_a_donor_with_too_few_demand_minutes_to_estimate_its_tail_keeps_all_it_showed() -> None:
    thin = Stub(tail=0.005, busy=50)  # 50 demand minutes cannot tell a 1% tail
    assert POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, thin))) == []
    never = Stub(tail=0.0, busy=0)  # no demand at all over the window: the slow lane lends
    assert len(POLICY.propose(view(pool("busy", 16, 16, 8), pool("idle", 32, 0, 0, never)))) == 1


def test_the_slow_lane_donor_idle_for_days_goes_first() -> None:
    days = pool("slow", 16, 0, 0, Stub(idle_min=5 * DAY))
    hours = pool("fast", 16, 0, 0, Stub(idle_min=120.0))
    busy = pool("busy", 16, 16, 8, Stub(lasted=3 * DAY))
    moves = POLICY.propose(view(busy, hours, days))
    assert [(m.from_pool, m.nodes) for m in moves] == [("slow", 1)]


def test_never_moves_nodes_back_within_the_reversal_window() -> None:
    just = (MoveRecord(NOW - 30, "busy", "idle", "busy", 1),)  # busy sent a node to idle 30 min ago
    pools = (pool("busy", 16, 16, 8), pool("idle", 40, 0), *FILL)
    policy = RebalancePolicy()
    assert policy.propose(view(*pools, moves=just)) == []
    later = (MoveRecord(NOW - 61, "busy", "idle", "busy", 1),)
    assert len(policy.propose(view(*pools, moves=later))) == 1


def test_takes_back_when_the_owner_needs_its_nodes_even_with_no_budget() -> None:
    owner = pool("a", 8, 8, 8)  # its second node is at b
    holder = pool("b", 24, 8)
    loans = (Loan("a", "b", 1),)
    moves = POLICY.propose(view(owner, holder, loans=loans, started=NOW))
    assert [(m.kind, m.from_pool, m.to_pool, m.nodes) for m in moves] == [(TAKEBACK, "b", "a", 1)]
    assert {e.signal for e in moves[0].evidence} == {"owner_shortfall_gpus", "move_budget_tokens"}


def test_no_takeback_of_a_loan_younger_than_the_reversal_window() -> None:
    owner, holder = pool("a", 8, 8, 8), pool("b", 24, 8)
    loans = (Loan("a", "b", 1),)
    recent = (MoveRecord(NOW - 59, "a", "b", "a", 1),)
    assert POLICY.propose(view(owner, holder, loans=loans, moves=recent)) == []
    older = (MoveRecord(NOW - 61, "a", "b", "a", 1),)
    assert len(POLICY.propose(view(owner, holder, loans=loans, moves=older))) == 1


def test_no_takeback_while_the_owner_fits_unless_hindsight_says_it_will_not() -> None:
    loans = (Loan("a", "b", 1),)
    assert POLICY.propose(view(pool("a", 8, 4), pool("b", 24, 8), loans=loans)) == []
    due = pool("a", 8, 4, 0, Stub(soon=True))
    assert len(POLICY.propose(view(due, pool("b", 24, 8), loans=loans))) == 1


def test_a_pool_with_nodes_away_takes_back_instead_of_borrowing() -> None:
    loans = (Loan("a", "b", 1),)
    moves = POLICY.propose(view(pool("a", 8, 8, 8), pool("b", 24, 24), pool("c", 32, 0), loans=loans))
    assert all(m.kind != LEND or m.to_pool != "a" for m in moves)


def test_borrowed_idle_nodes_go_onward_before_the_donors_own_and_cost_one_token() -> None:
    holder = pool("h", 24, 0)  # one of its three nodes is a's
    moves = POLICY.propose(view(pool("busy", 16, 16, 8), holder, pool("a", 8, 8), loans=(Loan("a", "h", 1),)))
    assert [(m.from_pool, m.to_pool, m.home_pool) for m in moves] == [("h", "busy", "a")]
    assert {e.signal: e.threshold for e in moves[0].evidence}["move_budget_tokens"] == 1.0


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
    assert len(RebalanceParams().as_dict()) <= 6
