"""Loans, homes and lends read from move_nodes proposals in a real store."""

from __future__ import annotations

from pathlib import Path

from proposals.states import APPLYING, APPROVED, PENDING, REJECTED
from proposals.store import Store
from recommender.policies.rebalance import Loan
from recommender.signals.history import PoolHistory
from recommender.signals.placement import place, read_moves
from tests.recommender.live import T0, move, submit

START = {"a": ["a1", "a2"], "b": ["b1"], "c": ["c1"]}


def test_applied_moves_are_followed_node_by_node(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], START))
        where = place(read_moves(store), T0, "rebalance")
        assert where.loans() == (Loan("a", "b", 1),)
        assert where.borrowed() == {"b": 1} and where.lent() == {"a": 1}
        submit(store, move("b", "c", ["a2"], {"b": ["a2", "b1"], "c": ["c1"]}, at=T0 + 60))
        where = place(read_moves(store), T0 + 60, "rebalance")
        assert where.loans() == (Loan("a", "c", 1),)  # lent onward: still a's
        assert [(x.donor, x.taker, x.nodes) for x in where.lends] == [("a", "b", 1), ("b", "c", 1)]
        submit(store, move("c", "a", ["a2"], {"c": ["a2", "c1"], "a": ["a1"]}, at=T0 + 120))
        where = place(read_moves(store), T0 + 120, "rebalance")
        assert where.loans() == () and where.home == {}  # back home: no longer on loan
        assert len(where.lends) == 2  # the return is a take-back, not a lend
        assert where.takebacks == [(T0 + 120, "a", 1)]  # counted against the move budget


def test_approved_and_applying_moves_are_in_transit(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], START), APPROVED)
        submit(store, move("c", "b", ["c1"], START), APPLYING)
        submit(store, move("a", "c", ["a1"], START), PENDING)
        where = place(read_moves(store), T0, "rebalance")
        assert where.loans() == (Loan("a", "b", 1, in_transit=True), Loan("c", "b", 1, in_transit=True))
        assert set(where.transit) == {"a2", "c1"}
        assert len(where.lends) == 3  # pending, approved and applying lends all count
        assert where.promised == {"c": 1}  # the pending lend's node is promised to its taker


def test_rejected_expired_and_other_policies_do_not_count_as_lends(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], START), REJECTED)
        submit(store, move("a", "c", ["a1"], START, at=T0 - 7200), PENDING)  # past expires_at
        submit(store, move("c", "b", ["c1"], START, policy="operator"))
        where = place(read_moves(store), T0, "rebalance")
        assert where.lends == []
        assert where.loans() == (Loan("c", "b", 1),)  # an operator's applied move still moved the node


def test_a_loan_the_live_partitions_no_longer_show_is_dropped(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        submit(store, move("a", "b", ["a2"], START))
        where = place(read_moves(store), T0, "rebalance", members={"a2": ("a",)})
        assert where.loans() == ()
        where = place(read_moves(store), T0, "rebalance", members={"a2": ("b",)})
        assert where.loans() == (Loan("a", "b", 1),)


def test_history_state_files_of_older_versions_still_load() -> None:
    old = PoolHistory.from_dict({"samples": {"a": [[T0, 8, 16]]}, "lends": [[T0, "b", 2]], "started": T0})
    assert [(x.donor, x.taker, x.nodes) for x in old.lends] == [("b", "b", 2)]
    old.lent("a", "b", T0 + 60, 1)
    again = PoolHistory.from_dict(old.to_dict())
    assert again.lends == old.lends and again.samples == old.samples
