"""One cycle with a temp store: submit, no duplicates, auto-approval, missing signals."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from proposals.approval_config import parse_approval_config
from proposals.model import from_dict
from proposals.states import APPROVED, EXPIRED, PENDING
from proposals.store import Store
from recommender.cycle import Recommender, proposal_shape, state_path_for
from recommender.policies.quota import QuotaParams, QuotaPolicy
from recommender.signals.model import NODES, Missing
from tests.proposals.factory import move_doc
from tests.recommender.live import Fixed
from tests.recommender.signals.factory import signals


def quota() -> QuotaPolicy:
    return QuotaPolicy(QuotaParams(priorities={"hi": 1}, persistence_seconds=0.0, cooldown_seconds=0.0))


def test_cycle_submits_once_and_auto_approves(tmp_path: Path) -> None:
    approval = parse_approval_config(
        {"name": "night", "auto_approve": {"set_vl_weights": {"max_weight_change_per_vl": 32}}}, "test"
    )
    with Store(tmp_path / "p.db") as store:
        rec = Recommender(Fixed(signals()), store, quota=quota(), approval=approval)
        result = rec.run_once()
        assert result.ok and len(result.submitted) == 1 and result.missing == ()
        assert [d.approved for d in result.decisions] == [True]
        assert store.get(result.submitted[0].id).state == APPROVED


def test_same_change_is_not_submitted_twice(tmp_path: Path) -> None:
    with Store(tmp_path / "p.db") as store:
        rec = Recommender(Fixed(signals(), signals(at=1_800_000_060.0)), store, quota=quota())
        assert len(rec.run_once().submitted) == 1
        again = rec.run_once()
        assert again.submitted == () and again.skipped_duplicates == 1
        assert len(store.list_proposals(PENDING)) == 1


def test_an_expired_proposal_is_expired_and_does_not_block_the_same_change(tmp_path: Path) -> None:
    """Once a pending proposal has expired, the next cycle marks it expired (auto-approval no longer tries
    it every cycle) and submits the same change again instead of skipping it as a duplicate."""
    now = [datetime(2020, 1, 1, tzinfo=UTC)]
    with Store(tmp_path / "p.db", clock=lambda: now[0]) as store:
        rec = Recommender(Fixed(signals(), signals(at=1_800_000_060.0)), store, quota=quota())
        (first,) = rec.run_once().submitted
        now[0] = first.proposal.expires_at + timedelta(seconds=1)
        again = rec.run_once()
        assert store.get(first.id).state == EXPIRED
        assert again.skipped_duplicates == 0 and len(again.submitted) == 1


def test_a_reclaim_is_not_the_drain_of_the_same_nodes() -> None:
    """A reclaim with the same changes as a pending drain is a different proposal (it is submitted)."""
    drain = from_dict(move_doc(1))
    assert proposal_shape(drain) == proposal_shape(from_dict(move_doc(1)))
    assert proposal_shape(drain) != proposal_shape(from_dict(dict(move_doc(1), reclaim="a1")))


def test_missing_signal_is_reported_and_nothing_proposed(tmp_path: Path) -> None:
    gone = Missing(f"{NODES}.node0001", "no GPU utilization")
    with Store(tmp_path / "p.db") as store:
        result = Recommender(Fixed(signals(missing=(gone,))), store, quota=quota()).run_once()
        assert result.submitted == () and gone in result.missing
        assert result.to_dict()["missing"] == [{"signal": "nodes.node0001", "reason": "no GPU utilization"}]


def test_hysteresis_memory_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    slow = QuotaPolicy(QuotaParams(priorities={"hi": 1}, persistence_seconds=60.0))
    with Store(db) as store:
        first = Recommender(Fixed(signals()), store, quota=slow, state_path=state_path_for(db)).run_once()
        assert first.submitted == ()
        later = replace(signals(), taken_at=signals().taken_at + 90)
        second = Recommender(Fixed(later), store, quota=slow, state_path=state_path_for(db)).run_once()
        assert len(second.submitted) == 1
