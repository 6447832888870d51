"""The live planner reads what the backtest's does: outlooks from kept samples, loans and moves from the
store (budget, reversal window, promised nodes), and its proposals carry forecast, value and budget."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from proposals.states import APPLIED, APPROVED, PENDING, REJECTED
from proposals.store import Store
from recommender.cycle import Recommender, moves_to_proposals
from recommender.policies.rebalance import (
    RECLAIM,
    TAKEBACK,
    Loan,
    MoveRecord,
    RebalanceParams,
    RebalancePolicy,
)
from recommender.policies.rebalance import Move as PolicyMove
from recommender.signals.history import PoolHistory, cluster_view
from recommender.signals.placement import Placement, place, read_moves
from tests.recommender.live import T0, Fixed, advance, move, snap, submit

# Compressed like the demo: plan every minute, 1-minute drain, 2-minute reversal window, a roomy budget.
PARAMS = RebalanceParams(
    cycle_min=1.0, drain_min=1.0, reversal_min=2.0, moves_per_pool_day=1000.0, history_min=60.0
)
HOME = {"a": ["a1", "a2"], "b": ["b1"]}
LENT = {"a": ["a1"], "b": ["a2", "b1"]}  # a2 (a's) lent to b


def rec(store: Store, params: RebalanceParams = PARAMS, progress: list[str] | None = None) -> Recommender:
    return Recommender(
        Fixed(snap(T0, HOME)),
        store,
        rebalance=RebalancePolicy(params),
        progress=progress.append if progress is not None else None,
    )


def cycle(
    r: Recommender,
    at: float,
    members: dict[str, list[str]],
    busy: tuple[str, ...] = (),
    pending: dict[str, int] | None = None,
) -> list[str]:
    """One run_once on a snapshot; the expected effects of the move_nodes proposals it submitted."""
    r.source = Fixed(snap(at, members, busy, pending))
    result = r.run_once()
    return [s.proposal.expected_effect for s in result.submitted if s.proposal.kind == "move_nodes"]


def test_an_owner_whose_demand_returns_takes_its_lent_node_back(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME))
        r = rec(store)
        # lent at T0: within the 2-minute reversal window nothing moves back
        assert cycle(r, T0 + 60, LENT, busy=("a1", "a2"), pending={"a": 8}) == []
        # then a2 is busy at b and b1 idle: the take-back recalls a2 (a's own), not b's idle node
        seen = cycle(r, T0 + 180, LENT, busy=("a1", "a2"), pending={"a": 8})
        assert len(seen) == 1 and seen[0].startswith("takeback: 1 node(s) (a2) of a from b to a")
        proposal = store.list_proposals(PENDING)[-1]
        assert proposal.proposal.reclaim == ""  # a take-back by drain
        assert proposal.proposal.changes[0].after == "b1"
        queries = [e.query for e in proposal.proposal.evidence]
        assert any("ibpool_pool_capacity_gpus" in q for q in queries) and any("budget" in q for q in queries)
        advance(store, proposal.id, APPLIED)
        view = cluster_view(
            snap(T0 + 360, HOME), r.history, 8, r.rebalance, place(read_moves(store), T0, "rebalance")
        )
        assert view.loans == ()
        assert [m.tokens for m in view.moves] == [2, 0]  # the lend paid its return; the take-back is free


def test_a_reclaim_proposal_says_it_requeues_the_jobs_on_the_node(tmp_path: Path) -> None:
    """With a reclaim faster than a drain (1 minute against 4) the owner short a node's worth reclaims a2,
    busy at b: a `move_nodes` proposal whose `reclaim` names a2 (the hooks requeue its jobs at once, with
    `reclaims: allow`) and whose effect and evidence say so; a drain's proposal names none."""
    params = replace(PARAMS, drain_min=4.0, reclaim_min=1.0)
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME))
        r = rec(store, params)
        seen = cycle(r, T0 + 180, LENT, busy=("a1", "a2"), pending={"a": 8})
        assert len(seen) == 1 and seen[0].startswith("reclaim: 1 node(s) (a2) of a from b to a")
        assert "requeues the jobs running on the node(s) (scontrol requeue" in seen[0]
        assert seen[0].endswith("[requeue jobs on: a2]")
        proposal = store.list_proposals(PENDING)[-1].proposal
        assert proposal.kind == "move_nodes" and proposal.changes[0].after == "b1"
        assert proposal.reclaim_nodes == ("a2",)
        queries = [e.query for e in proposal.evidence]
        assert any("requeue" in q for q in queries)


def test_a_pool_with_nodes_away_does_not_borrow(tmp_path: Path) -> None:
    three = {"a": ["a1"], "b": ["a2", "b1"], "c": ["c1", "c2", "c3", "c4"]}
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], {"a": ["a1", "a2"], "b": ["b1"], "c": []}))
        r = rec(store)
        for k in range(8):
            effects = cycle(r, T0 + 60 * k, three, busy=("a1", "a2", "b1"), pending={"a": 8})
            assert all(not e.startswith("lend") for e in effects)


def test_view_reads_homes_capacity_idle_nodes_and_moves_from_the_store(tmp_path: Path) -> None:
    members = {"a": ["a1"], "b": ["a2", "b1", "b2"], "c": ["c1"]}
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], {"a": ["a1", "a2"], "b": ["b1", "b2"]}))
        submit(store, move("b", "c", ["b2"], {"b": ["a2", "b1", "b2"], "c": ["c1"]}), APPROVED)
        history = PoolHistory()
        signals = snap(T0, members)
        history.record(signals)
        view = cluster_view(
            signals, history, 8, RebalancePolicy(PARAMS), place(read_moves(store), T0, "rebalance")
        )
        pools = {p.name: p for p in view.pools}
        assert {n: p.home_gpus for n, p in pools.items()} == {"a": 16, "b": 16, "c": 8}
        assert pools["b"].capacity_gpus == 16 and pools["b"].idle_nodes == 2  # b2 is on its way to c
        assert view.loans == (Loan("a", "b", 1), Loan("b", "c", 1, in_transit=True))
        assert sorted(view.moves, key=lambda m: (m.src, m.dst)) == [
            MoveRecord(T0 / 60, "a", "b", "a", 1),
            MoveRecord(T0 / 60, "b", "c", "b", 1),
        ]
        assert view.started_min == T0 / 60


BORROW = {"busy": ["n1"], "spare": ["s1", "s2", "s3", "s4"]}


def lend_scenario(store: Store, params: RebalanceParams, state: str) -> tuple[Recommender, str, int]:
    """busy waits for 16 GPUs from T0; spare lends once the shortfall is worth the move; the lend is
    taken to `state`. The recommender, the lend's effect and the cycle it came at."""
    r = rec(store, params)
    for k in range(20):
        effects = cycle(r, T0 + 60 * k, BORROW, busy=("n1",), pending={"busy": 16})
        if effects:
            break
    lends = store.list_proposals(PENDING)
    assert len(lends) == 1 and len(effects) == 1 and effects[0].startswith("lend:")
    if state != PENDING:
        advance(store, lends[0].id, state)
    return r, effects[0], k


def test_a_lend_carries_the_forecast_the_value_and_the_budget_left(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        _, lend, k = lend_scenario(store, PARAMS, PENDING)
        # the spare node's idle span (its expected loan) must outlast the 2-minute reversal window and the
        # 1-minute drain, and 8 GPUs a minute over it pay two tokens at 16 GPU-minutes each
        assert k == 5 and "(s3, s4)" in lend
        evidence = store.list_proposals(PENDING)[0].proposal.evidence
        rate = next(e for e in evidence if "avg_over_time" in e.query)
        assert rate.value == 8.0 and rate.window == "5m"  # the taker's use over the expected loan
        texts = [e.query for e in evidence]
        assert any(t.startswith("planner value") for t in texts)
        assert any(t.startswith("move budget tokens left") for t in texts)
        assert any("wait allowance" in t for t in texts)


def test_a_restart_keeps_the_budget_and_the_reversal_window(tmp_path: Path) -> None:
    tight = replace(PARAMS, moves_per_pool_day=3.0)  # 6 tokens a day; the lend of 2 nodes took 4
    with Store(tmp_path / "p.db") as store:
        submit(store, move("busy", "spare", ["n0"], {"busy": ["n0", "n1"], "spare": ["s1", "s2", "s3"]}))
        # the state a day later: 6 tokens accrued (full), the lend above took 2, so 4 are left
        r = Recommender(Fixed(snap(T0, BORROW)), store, rebalance=RebalancePolicy(tight))
        r.history.started = T0 - 86400
        view = cluster_view(
            snap(T0 + 60, BORROW), r.history, 8, r.rebalance, place(read_moves(store), T0 + 60, "rebalance")
        )
        assert r.rebalance.budget_left(view) == pytest.approx(6.0 - 2.0 + 6.0 / 1440)
        # spare got a node from busy a minute ago: it may not send one back within the window
        assert cycle(r, T0 + 60, BORROW, busy=("n1",), pending={"busy": 16}) == []


def test_a_rejected_lend_does_not_count(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        r, _, k = lend_scenario(store, PARAMS, REJECTED)
        assert len(cycle(r, T0 + 60 * (k + 1), BORROW, busy=("n1",), pending={"busy": 16})) == 1


def test_a_pool_waiting_for_an_approval_is_not_offered_more_nodes(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        r, _, k = lend_scenario(store, PARAMS, PENDING)
        for j in range(k + 1, k + 5):
            assert cycle(r, T0 + 60 * j, BORROW, busy=("n1",), pending={"busy": 16}) == []
        where = place(read_moves(store), T0 + 60 * (k + 5), "rebalance")
        assert where.promised == {"busy": 2}


def test_moves_that_share_a_pool_go_into_one_proposal(tmp_path: Path) -> None:
    """One donor lends to two borrowers in one cycle: one proposal rewriting the three partitions, so no
    proposal's `before` goes stale when another is applied; the store still tells the two lends apart."""
    members = {"x": ["x1"], "y": ["y1"], "donor": ["d1", "d2", "d3", "d4", "d5", "d6"]}
    with Store(tmp_path / "p.db") as store:
        r = rec(store)
        effects = [
            e
            for k in range(8)
            for e in cycle(r, T0 + 60 * k, members, busy=("x1", "y1"), pending={"x": 8, "y": 16})
        ]
        moves = [s.proposal for s in store.list_proposals(PENDING)]
        assert len(moves) == 1 and len(effects) == 1
        targets = [c.target for c in moves[0].changes]
        assert sorted(targets) == [f"slurm.partition.{p}.nodes" for p in ("donor", "x", "y")]
        assert effects[0].count("lend:") == 2
        advance(store, store.list_proposals(PENDING)[0].id, APPLIED)
        where = place(read_moves(store), T0, "rebalance")
        assert sorted((x.donor, x.taker, x.nodes) for x in where.lends) == [
            ("donor", "x", 1),
            ("donor", "y", 2),
        ]


def test_history_feeds_the_same_outlook_the_backtest_reads() -> None:
    """Samples every minute: the live outlook sees the taker's use and the donor's idle span and rises."""
    history = PoolHistory()
    policy = RebalancePolicy(replace(PARAMS, history_min=600.0))
    members = {"busy": ["n1"], "spare": ["s1", "s2"]}
    for k in range(30):
        signals = snap(T0 + 60 * k, members, busy=("n1", "s1") if k < 10 else ("n1",), pending={"busy": 8})
        history.record(signals)
    pools = {p.name: p for p in cluster_view(signals, history, 8, policy).pools}
    assert pools["busy"].outlook.use(8, 8, 30.0) == 8.0
    assert pools["spare"].outlook.idle(0) == (20.0, None)  # s1 was busy until minute 9: persistence
    assert pools["spare"].outlook.rises(0, 30.0) == (1, 10, 30.0)  # one rise, 10 demand minutes in 30


def test_once_shows_progress(tmp_path: Path) -> None:
    lines: list[str] = []
    with Store(tmp_path / "p.db") as store:
        r = rec(store, progress=lines)
        cycle(r, T0, BORROW, busy=("n1",), pending={"busy": 16})
    assert lines[0].startswith("fetching signals") and any(x.startswith("planning over") for x in lines)


def test_a_grouped_proposal_reclaims_only_the_reclaims_nodes() -> None:
    """b holds a2 (a's) and c2 (c's), both busy: a reclaims a2 while c takes c2 back by drain. The moves
    share b, so they are one proposal; its `reclaim` names a2 only (c2's jobs are left to end)."""
    signals = snap(T0, {"a": ["a1"], "b": ["a2", "b1", "c2"], "c": ["c1"]}, busy=("a2", "c2"))
    where = Placement(home={"a2": "a", "c2": "c"}, at={"a2": "b", "c2": "b"})
    moves = [
        PolicyMove(RECLAIM, "b", "a", "a", 1, "the owner wants it now", ()),
        PolicyMove(TAKEBACK, "b", "c", "c", 1, "the owner's demand returned", ()),
    ]
    (proposal,) = moves_to_proposals(signals, moves, RebalancePolicy(PARAMS), placement=where)
    assert {c.target: c.after for c in proposal.changes} == {
        "slurm.partition.b.nodes": "b1",
        "slurm.partition.a.nodes": "a1,a2",
        "slurm.partition.c.nodes": "c1,c2",
    }
    assert proposal.reclaim_nodes == ("a2",)
