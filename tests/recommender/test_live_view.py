"""The live rebalance inputs match the backtest's: take-back persistence, loans, homes, cooldowns, budget."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from proposals.states import APPLIED, APPROVED, PENDING, REJECTED
from proposals.store import Store
from recommender.cycle import Recommender
from recommender.policies.rebalance import Loan, RebalanceParams, RebalancePolicy
from recommender.signals.history import PoolHistory, cluster_view
from recommender.signals.model import Signals
from recommender.signals.placement import place, read_moves
from tests.recommender.live import T0, Fixed, advance, move, snap, submit

PARAMS = RebalanceParams(
    persistence_min=2.0,
    min_history_min=0.0,
    reserve_window_min=60.0,
    cooldown_min=60.0,
    takeback_persistence_min=5.0,
    lend_budget_per_pool_day=10.0,
    lend_budget_window_min=1440.0,
    move_budget_per_pool_day=20.0,
)
HOME = {"a": ["a1", "a2"], "b": ["b1"]}
LENT = {"a": ["a1"], "b": ["a2", "b1"]}  # a2 (a's) lent to b
BACK = HOME


def rec(store: Store, params: RebalanceParams = PARAMS) -> Recommender:
    return Recommender(Fixed(snap(T0, HOME)), store, rebalance=RebalancePolicy(params))


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


def test_owner_demand_that_lasts_takes_the_lent_node_back(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME))
        r = rec(store)
        # a2 is busy at b and b1 idle: the take-back still recalls a2 (a's own), not b's idle node.
        seen = [cycle(r, T0 + 60 * k, LENT, busy=("a1", "a2"), pending={"a": 8}) for k in range(5)]
        assert seen[:4] == [[], [], [], []]  # not yet lasted the 5 min take-back persistence
        assert len(seen[4]) == 1 and seen[4][0].startswith("takeback: 1 node(s) (a2) of a from b to a")
        pid = store.list_proposals(PENDING)[-1].id
        assert store.get(pid).proposal.changes[0].after == "b1"
        advance(store, pid, APPLIED)
        view = cluster_view(
            snap(T0 + 360, BACK), r.history, 8, r.rebalance, place(read_moves(store), T0, "rebalance")
        )
        assert view.loans == ()


def test_an_owner_that_lent_hours_ago_recalls_after_the_shorter_window(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME))  # lent at T0: a take-back two hours on is no reversal
        r = rec(store)
        later = T0 + 7200
        seen = [cycle(r, later + 60 * k, LENT, busy=("a1", "a2"), pending={"a": 8}) for k in range(3)]
        assert PARAMS.settled_takeback_min == 3.0
        assert seen[:2] == [[], []]  # not yet lasted 3 min
        assert len(seen[2]) == 1 and seen[2][0].startswith("takeback: 1 node(s) (a2) of a from b to a")


def test_a_spike_shorter_than_takeback_persistence_recalls_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME))
        r = rec(store)
        for k in range(6):
            assert cycle(r, T0 + 60 * k, LENT, busy=("a1",), pending={"a": 8 if k == 5 else 0}) == []
        for k in range(6, 9):
            assert cycle(r, T0 + 60 * k, LENT, busy=("a1",), pending={"a": 8}) == []
        assert len(cycle(r, T0 + 60 * 9, LENT, busy=("a1",), pending={"a": 8})) == 1  # lasted 5 min


def test_a_pool_with_nodes_away_does_not_borrow(tmp_path: Path) -> None:
    three = {"a": ["a1"], "b": ["a2", "b1"], "c": ["c1", "c2", "c3", "c4"]}
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], {"a": ["a1", "a2"], "b": ["b1"], "c": []}))
        r = rec(store)
        # a's pending lasts, but b's nodes are all busy: a waits to take back, and borrows nothing from c.
        for k in range(4):
            effects = cycle(r, T0 + 60 * k, three, busy=("a1", "a2", "b1"), pending={"a": 8})
            assert all(not e.startswith("lend") for e in effects)


def test_view_reads_homes_capacity_and_idle_nodes_from_the_store(tmp_path: Path) -> None:
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
        assert view.last_lend_min == {"a": T0 / 60, "b": T0 / 60, "c": T0 / 60}  # donor and taker


BORROW = {"busy": ["n1"], "spare": ["s1", "s2", "s3", "s4"]}


def lend_scenario(store: Store, params: RebalanceParams, state: str) -> tuple[Recommender, str]:
    """busy waits for 16 GPUs; spare lends; the lend is taken to `state`. The recommender, the lend."""
    r = rec(store, params)
    effects = [e for k in range(3) for e in cycle(r, T0 + 60 * k, BORROW, busy=("n1",), pending={"busy": 16})]
    lends = store.list_proposals(PENDING)
    assert len(lends) == 1 and len(effects) == 1 and effects[0].startswith("lend:")
    advance(store, lends[0].id, state)
    return r, effects[0]


def test_a_restart_keeps_the_cooldown(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        _, lend = lend_scenario(store, PARAMS, APPLIED)
        assert "(s3, s4)" in lend
        after = {"busy": ["n1", "s3", "s4"], "spare": ["s1", "s2"]}
        r = rec(store)  # a restart: a new PoolHistory, the same store
        for k in range(3, 7):
            assert cycle(r, T0 + 60 * k, after, busy=("n1",), pending={"busy": 16}) == []
        assert cycle(r, T0 + 3590, after, busy=("n1",), pending={"busy": 16}) == []  # 59 min after
        assert len(cycle(r, T0 + 3700, after, busy=("n1",), pending={"busy": 16})) == 1  # cooled down


def test_a_restart_keeps_the_lend_budget(tmp_path: Path) -> None:
    tight = replace(PARAMS, cooldown_min=0.0, lend_budget_per_pool_day=0.5)
    with Store(tmp_path / "p.db") as store:
        lend_scenario(store, tight, APPLIED)
        after = {"busy": ["n1", "s4"], "spare": ["s1", "s2", "s3"]}
        r = rec(store, tight)
        for k in range(3, 7):
            assert cycle(r, T0 + 60 * k, after, busy=("n1",), pending={"busy": 16}) == []


def test_a_rejected_lend_does_not_count(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        r, _ = lend_scenario(store, PARAMS, REJECTED)
        assert len(cycle(r, T0 + 180, BORROW, busy=("n1",), pending={"busy": 16})) == 1


def test_a_takeback_starts_the_owners_cooldown(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME, at=T0))
        submit(store, move("b", "a", ["a2"], LENT, at=T0 + 600))
        view = cluster_view(
            snap(T0 + 660, BACK),
            PoolHistory(),
            8,
            RebalancePolicy(PARAMS),
            place(read_moves(store), T0, "rebalance"),
        )
        assert view.loans == ()
        assert view.last_lend_min == {"a": (T0 + 600) / 60, "b": T0 / 60}
        # Both moves count against the move budget: the lend and the take-back.
        assert view.recent_lends == ((T0 / 60, 1),)
        assert view.recent_takebacks == (((T0 + 600) / 60, 1),)


def test_history_feeds_the_time_of_day_profile_and_the_longer_windows() -> None:
    """Six days of a day pool (busy 08:00-20:00, 8 GPUs pending then) sampled every 10 minutes."""
    day0 = (T0 // 86400 + 1) * 86400
    history = PoolHistory()
    members = {"day": ["d1", "d2"], "night": ["n1", "n2"]}
    policy = RebalancePolicy(replace(PARAMS, chronic_pending_min=120.0))

    def record(k: int) -> Signals:
        on = 8 <= (k % 144) // 6 < 20
        signals = snap(
            day0 + 600 * k, members, busy=("d1", "d2") if on else (), pending={"day": 8 if on else 0}
        )
        history.record(signals)
        return signals

    for k in range(5 * 144 + 19 * 6):  # up to day 5, 18:50: in the shift
        signals = record(k)
    pools = {p.name: p for p in cluster_view(signals, history, 8, policy).pools}
    assert pools["day"].pending_chronic_min_gpus == 8 and pools["day"].demand_recent_peak_gpus == 24
    assert pools["night"].pending_chronic_min_gpus == 0
    for k in range(5 * 144 + 19 * 6, 6 * 144 + 7 * 6 + 5):  # on to day 6, 07:50
        signals = record(k)
    pools = {p.name: p for p in cluster_view(signals, history, 8, policy).pools}
    # 07:50 + the 20-minute lead reaches into the shift, seen on each of the last 6 days (>= 5 needed).
    assert pools["day"].planned_demand_gpus == 24 and pools["day"].planned_peak_gpus == 24
    assert pools["night"].planned_demand_gpus == 0
    assert pools["day"].pending_chronic_min_gpus == 0 and pools["day"].demand_recent_peak_gpus == 0
    off = RebalancePolicy(replace(PARAMS, plan_days=0))
    assert all(p.planned_demand_gpus is None for p in cluster_view(signals, history, 8, off).pools)


def test_moves_that_share_a_pool_go_into_one_proposal(tmp_path: Path) -> None:
    """One donor lends to two borrowers in one cycle: one proposal rewriting the three partitions, so no
    proposal's `before` goes stale when another is applied; the store still tells the two lends apart."""
    members = {
        "x": ["x1"],
        "y": ["y1"],
        "donor": ["d1", "d2", "d3", "d4", "d5", "d6"],
        "q": ["q1"],
        "z": ["z1"],
    }
    with Store(tmp_path / "p.db") as store:
        r = rec(store, replace(PARAMS, reserve_headroom=0.0))
        busy = ("x1", "y1", "q1")
        effects = [
            e
            for k in range(3)
            for e in cycle(r, T0 + 60 * k, members, busy=busy, pending={"x": 8, "y": 16, "q": 0, "z": 0})
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
        assert sorted(set(where.at.values())) == ["x", "y"] and set(where.home.values()) == {"donor"}


def test_a_pool_waiting_for_an_approval_is_not_offered_more_nodes(tmp_path: Path) -> None:
    """After the borrower's cooldown the lend is still pending: its nodes are promised, so no other
    donor is asked for the same need (only the proposal's own donor was cooling)."""
    members = {"x": ["x1"], "donor": ["d1", "d2", "d3"], "other": ["o1", "o2", "o3"]}
    with Store(tmp_path / "p.db") as store:
        r = rec(store, replace(PARAMS, reserve_headroom=0.0))
        for minute in (0, 1, 2, 30, 31):
            cycle(r, T0 + 60 * minute, members, busy=("x1",), pending={"x": 8})
        pending = store.list_proposals(PENDING)
        assert len(pending) == 1
        where = place(read_moves(store), T0 + 31 * 60, "rebalance")
        assert where.promised == {"x": 1}


def test_an_owner_idle_within_the_last_hour_recalls_at_its_first_waiting_minute(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], HOME))  # lent at T0; a stays idle for two hours
        r = rec(store)
        later = T0 + 7200
        for k in range(61):  # watched a full quiet window: a had no demand
            assert cycle(r, later - 3660 + 60 * k, LENT) == []
        seen = cycle(r, later, LENT, busy=("a1",), pending={"a": 8})
        assert len(seen) == 1 and seen[0].startswith("takeback: 1 node(s) (a2) of a from b to a")
        assert "after an idle spell" in seen[0]
