"""Approval rules: approver is not the proposer, auto-approval within bounds, blast-radius limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proposals import approval, limits, states
from proposals.approval_config import (
    ApprovalConfig,
    AutoApprove,
    BlastRadius,
    MoveNodesBounds,
    PortGroupBounds,
    VlWeightBounds,
)
from proposals.errors import ApprovalRefusedError
from proposals.store import Store
from tests.proposals.factory import FakeClock, move_doc, open_store, proposal, vl_weights_doc

LOOSE = ApprovalConfig(limits=BlastRadius(100, 1.0, 255))
AUTO = ApprovalConfig(
    "auto",
    AutoApprove(VlWeightBounds(16), MoveNodesBounds(2), PortGroupBounds(frozenset({0, 1}))),
    BlastRadius(100, 1.0, 255),
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Store:
    return open_store(tmp_path / "p.db", clock)


PROPOSER_ACCOUNT = "unix:ibpool-recommender"
"""The proposer's real identity: not the account these tests run as, which approves."""


def submit(store: Store, doc: dict[str, Any], by: str | None = None) -> str:
    return store.submit(proposal(doc), by, actor=PROPOSER_ACCOUNT)[0].id


def vlarb(before: str, after: str, target: str = "opensm.vlarb_low", **extra: Any) -> dict[str, Any]:
    return vl_weights_doc(changes=[{"target": target, "before": before, "after": after}], **extra)


def test_a_person_approves_and_is_recorded(store: Store) -> None:
    pid = submit(store, vl_weights_doc(), "carol")
    stored = approval.approve(store, pid, "alice", LOOSE)
    assert stored.state == states.APPROVED
    last = store.audit(pid)[-1]
    assert (last.who, last.from_state, last.to_state, last.result) == ("alice", "pending", "approved", "ok")


@pytest.mark.parametrize("approver", ["carol", "Carol"])
def test_the_proposer_cannot_approve(store: Store, approver: str) -> None:
    pid = submit(store, vl_weights_doc(), "carol")
    with pytest.raises(ApprovalRefusedError, match="the approver must not be the proposer"):
        approval.approve(store, pid, approver, LOOSE)
    assert store.get(pid).state == states.PENDING
    last = store.audit(pid)[-1]
    assert (last.who, last.result, last.to_state) == (approver, "refused", "pending")
    assert "must not be the proposer" in last.detail


@pytest.mark.parametrize("name", ["policy:auto", "system", "", "a b", "-x"])
def test_people_cannot_pose_as_policies(store: Store, name: str) -> None:
    pid = submit(store, vl_weights_doc())
    with pytest.raises(ValueError, match="not a person's name"):
        approval.approve(store, pid, name, LOOSE)
    assert len(store.audit(pid)) == 1


def test_the_proposer_may_withdraw(store: Store) -> None:
    pid = submit(store, vl_weights_doc(), "carol")
    assert approval.reject(store, pid, "carol", "superseded").state == states.REJECTED
    assert store.audit(pid)[-1].detail == "superseded"


def test_blast_radius_share_of_a_pool(store: Store) -> None:
    pid = submit(store, move_doc(moved=3, donor_size=4))
    config = ApprovalConfig(limits=BlastRadius(100, 0.5, 255))
    with pytest.raises(ApprovalRefusedError) as err:
        approval.approve(store, pid, "alice", config)
    assert err.value.reasons == [
        "slurm.partition.a.nodes: removes 3 of 4 (75%): more than max_pool_share_moved 50%"
    ]
    assert (
        approval.approve(store, submit(store, move_doc(2, 4, tag="x")), "alice", config).state == "approved"
    )


def test_blast_radius_weight_step(store: Store) -> None:
    pid = submit(store, vlarb("0:32,1:32", "0:100,1:32"))
    config = ApprovalConfig(limits=BlastRadius(100, 1.0, 64))
    with pytest.raises(ApprovalRefusedError) as err:
        approval.approve(store, pid, "alice", config)
    assert err.value.reasons == [
        "opensm.vlarb_low: VL 0 weight 32 -> 100 changes by 68: more than max_weight_change_per_step 64"
    ]


def test_blast_radius_nodes_per_hour(store: Store, clock: FakeClock) -> None:
    config = ApprovalConfig(limits=BlastRadius(3, 1.0, 255))
    first = submit(store, move_doc(2, 8, tag="p"))
    approval.approve(store, first, "alice", config)
    clock.advance(minutes=10)
    second = submit(store, move_doc(2, 8, tag="q"))
    with pytest.raises(ApprovalRefusedError, match="2 were moved by other approvals in the last hour"):
        approval.approve(store, second, "alice", config)
    # A move that was rolled back no longer counts, and neither does one approved over an hour ago.
    for state in (states.APPLYING, states.FAILED, states.ROLLED_BACK):
        store.transition(first, state, "hooks")
    assert approval.approve(store, second, "alice", config).state == states.APPROVED
    third = submit(store, move_doc(2, 8, tag="r"))
    with pytest.raises(ApprovalRefusedError):
        approval.approve(store, third, "alice", config)
    clock.advance(minutes=61)
    assert approval.approve(store, third, "alice", config).state == states.APPROVED


def test_several_reasons_at_once(store: Store) -> None:
    doc = move_doc(3, 4)
    pid = submit(store, doc, "carol")
    with pytest.raises(ApprovalRefusedError) as err:
        approval.approve(store, pid, "carol", ApprovalConfig(limits=BlastRadius(2, 0.5, 255)))
    assert len(err.value.reasons) == 3


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (vlarb("0:32,1:32", "0:48,1:32"), None),
        (
            vlarb("0:32,1:32", "0:49,1:32"),
            "VL 0 weight 32 -> 49 changes by 17: more than max_weight_change_per_vl 16",
        ),
        (vlarb("0:8,1:32", "0:0,1:32"), "VL 0 weight 8 -> 0 would starve the VL"),
        (vlarb("0:8,1:32", "1:32"), "VL 0 weight 8 -> 0 would starve the VL"),
        (vlarb("0:0,1:32", "0:16,1:32"), None),
        (
            vlarb("0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7", "1,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7", "opensm.sl2vl"),
            "changes opensm.sl2vl, which policy:auto never auto-approves",
        ),
        (move_doc(2, 8), None),
        (move_doc(3, 8), "moves 3 nodes: more than max_nodes 2 of policy:auto"),
        (
            vl_weights_doc(
                kind="set_port_group",
                changes=[{"target": "opensm.port_group.a.sl", "before": "0", "after": "1"}],
            ),
            None,
        ),
        (
            vl_weights_doc(
                kind="set_port_group",
                changes=[{"target": "opensm.port_group.a.sl", "before": "0", "after": "5"}],
            ),
            "opensm.port_group.a.sl: SL 5 is not in allowed_sls [0, 1] of policy:auto",
        ),
    ],
)
def test_auto_approval_bounds(store: Store, doc: dict[str, Any], reason: str | None) -> None:
    pid = submit(store, doc)
    decision = approval.auto_approve(store, pid, AUTO)
    last = store.audit(pid)[-1]
    assert last.who == "policy:auto"
    if reason is None:
        assert decision.approved and store.get(pid).state == states.APPROVED
        assert last.detail == "auto-approved within bounds"
    else:
        assert not decision.approved and store.get(pid).state == states.PENDING
        assert any(reason in r for r in decision.reasons), decision.reasons
        assert last.result == "refused" and reason in last.detail


def test_auto_approval_respects_blast_radius_and_proposer(store: Store) -> None:
    tight = ApprovalConfig("auto", AUTO.auto_approve, BlastRadius(1, 1.0, 255))
    decision = approval.auto_approve(store, submit(store, move_doc(2, 8)), tight)
    assert not decision.approved
    assert "max_nodes_moved_per_hour 1" in decision.reasons[0]
    own = submit(store, vl_weights_doc(policy="auto"))
    decision = approval.auto_approve(store, own, AUTO)
    assert decision.reasons == ("policy:auto proposed it; the approver must not be the proposer",)


def test_kinds_not_covered_are_left_alone(store: Store) -> None:
    only_moves = ApprovalConfig("auto", AutoApprove(move_nodes=MoveNodesBounds(4)))
    pid = submit(store, vl_weights_doc())
    decision = approval.auto_approve(store, pid, only_moves)
    assert not decision.approved
    assert decision.reasons == ("policy:auto does not auto-approve set_vl_weights proposals",)
    assert len(store.audit(pid)) == 1
    with pytest.raises(ValueError, match="needs a name"):
        approval.auto_approve(store, pid, LOOSE)


def test_a_reclaim_is_auto_approved_only_where_the_policy_allows_reclaims(store: Store) -> None:
    """A reclaim requeues running jobs: a policy that auto-approves moves does not approve one unless it
    says `reclaims: true`; the same move without a reclaim is approved."""
    moves = ApprovalConfig("auto", AutoApprove(move_nodes=MoveNodesBounds(2)))
    reclaim = submit(store, dict(move_doc(1, 8, tag="r"), reclaim="a1r"))
    decision = approval.auto_approve(store, reclaim, moves)
    assert not decision.approved
    assert decision.reasons == (
        "takes 1 node(s) back by reclaim (their jobs requeued): policy:auto auto-approves reclaims only "
        "with move_nodes.reclaims: true",
    )
    assert approval.auto_approve(store, submit(store, move_doc(1, 8, tag="d")), moves).approved
    allowing = ApprovalConfig("auto", AutoApprove(move_nodes=MoveNodesBounds(2, reclaims=True)))
    assert approval.auto_approve(store, reclaim, allowing).approved


def test_auto_approve_pending(store: Store) -> None:
    small = submit(store, move_doc(1, 8, tag="s"))
    big = submit(store, move_doc(3, 8, tag="b"))
    weights = submit(store, vl_weights_doc())
    done = submit(store, move_doc(1, 8, tag="d"))
    store.transition(done, states.REJECTED, "alice")
    only_moves = ApprovalConfig("auto", AutoApprove(move_nodes=MoveNodesBounds(2)))
    decisions = {d.proposal_id: d.approved for d in approval.auto_approve_pending(store, only_moves)}
    assert decisions == {small: True, big: False}
    assert store.get(weights).state == states.PENDING


def test_measures() -> None:
    p = proposal(move_doc(2, 4))
    assert limits.moved_nodes(p) == {"a1", "a2"}
    assert limits.pool_shares_removed(p) == {
        "slurm.partition.a.nodes": (2, 4),
        "slurm.partition.b.nodes": (0, 1),
    }
    guid = "0x0002c9030000000{}".format
    partitions = proposal(
        {
            **move_doc(),
            "changes": [
                {
                    "target": "opensm.partition.a.members",
                    "before": f"{guid(1)},{guid(2)}=full",
                    "after": f"{guid(2)}=limited",
                },
                {"target": "opensm.partition.b.members", "before": guid(3), "after": f"{guid(1)},{guid(3)}"},
            ],
        }
    )
    assert limits.moved_nodes(partitions) == {guid(1)}
    assert limits.pool_shares_removed(partitions)["opensm.partition.a.members"] == (1, 2)
    weights = proposal(vlarb("0:32,1:32", "1:40,2:8"))
    assert limits.weight_steps(weights) == [
        ("opensm.vlarb_low", 0, 32, 0),
        ("opensm.vlarb_low", 1, 32, 40),
        ("opensm.vlarb_low", 2, 0, 8),
    ]
