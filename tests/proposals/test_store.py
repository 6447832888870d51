"""The proposal store: lifecycle, audit log, persistence, expiry, step records."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from proposals import states
from proposals.errors import (
    AmbiguousIdError,
    IllegalTransitionError,
    ProposalExpiredError,
    RefusedError,
    StoreError,
    UnknownProposalError,
)
from proposals.metrics import oldest_pending_age_seconds, proposal_counts
from proposals.records import StoredProposal
from proposals.store import SYSTEM, Store
from tests.proposals.factory import FakeClock, move_doc, open_store, proposal, vl_weights_doc

PATHS: dict[str, list[str]] = {
    states.PENDING: [],
    states.APPROVED: [states.APPROVED],
    states.REJECTED: [states.REJECTED],
    states.EXPIRED: [states.EXPIRED],
    states.APPLYING: [states.APPROVED, states.APPLYING],
    states.APPLIED: [states.APPROVED, states.APPLYING, states.APPLIED],
    states.FAILED: [states.APPROVED, states.APPLYING, states.FAILED],
    states.ROLLED_BACK: [states.APPROVED, states.APPLYING, states.FAILED, states.ROLLED_BACK],
}
LEGAL = {
    (states.PENDING, states.APPROVED),
    (states.PENDING, states.REJECTED),
    (states.PENDING, states.EXPIRED),
    (states.APPROVED, states.APPLYING),
    (states.APPROVED, states.EXPIRED),
    (states.APPLYING, states.APPLIED),
    (states.APPLYING, states.FAILED),
    (states.FAILED, states.ROLLED_BACK),
}
PAIRS = [(a, b) for a in states.STATES for b in states.STATES]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(tmp_path / "p.db")


def drive(store: Store, to: str) -> StoredProposal:
    stored, _ = store.submit(proposal())
    for state in PATHS[to]:
        stored = store.transition(stored.id, state, "alice")
    return stored


def test_the_state_machine_is_the_documented_one() -> None:
    assert {(a, b) for a, nexts in states.TRANSITIONS.items() for b in nexts} == LEGAL
    assert {states.REJECTED, states.EXPIRED, states.APPLIED, states.ROLLED_BACK} == states.TERMINAL


@pytest.mark.parametrize(("start", "to"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_every_transition(store: Store, start: str, to: str) -> None:
    stored = drive(store, start)
    audit_before = store.audit(stored.id)
    if (start, to) in LEGAL:
        after = store.transition(stored.id, to, "bob", "because")
        assert after.state == to == store.get(stored.id).state
        last = store.audit(stored.id)[-1]
        assert (last.from_state, last.to_state, last.who, last.result, last.detail) == (
            start,
            to,
            "bob",
            "ok",
            "because",
        )
    else:
        with pytest.raises(IllegalTransitionError, match=f"is {start}; cannot move it to {to}"):
            store.transition(stored.id, to, "bob")
        assert store.get(stored.id).state == start
        assert store.audit(stored.id) == audit_before


def test_unknown_state_and_id(store: Store) -> None:
    stored = drive(store, states.PENDING)
    with pytest.raises(IllegalTransitionError, match="unknown state"):
        store.transition(stored.id, "done", "bob")
    with pytest.raises(UnknownProposalError):
        store.transition("f" * 64, states.APPROVED, "bob")
    with pytest.raises(ValueError, match="printable name"):
        store.transition(stored.id, states.APPROVED, " bob")


def test_submit_is_idempotent_and_records_the_proposer(store: Store) -> None:
    first, created = store.submit(proposal(), "carol")
    again, created_again = store.submit(proposal(), "dave")
    assert created and not created_again
    assert again == first
    assert first.proposer == "carol" and first.state == states.PENDING
    assert len(store.list_proposals()) == 1
    assert [(e.from_state, e.to_state, e.who) for e in store.audit(first.id)] == [(None, "pending", "carol")]
    by_policy, _ = store.submit(proposal(move_doc()))
    assert by_policy.proposer == "policy:rebalance"


def test_guard_refusal_is_recorded_and_changes_nothing(store: Store) -> None:
    stored = drive(store, states.PENDING)

    def refuse(_: StoredProposal) -> None:
        raise RefusedError("no", ["too big", "too fast"])

    with pytest.raises(RefusedError):
        store.transition(stored.id, states.APPROVED, "bob", guard=refuse)
    assert store.get(stored.id).state == states.PENDING
    last = store.audit(stored.id)[-1]
    assert (last.from_state, last.to_state, last.result) == ("pending", "pending", "refused")
    assert last.detail == "refused approved: too big; too fast"


def test_expiry(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path / "p.db", clock)
    pending, _ = store.submit(proposal())
    approved, _ = store.submit(proposal(vl_weights_doc(policy="b")))
    store.transition(approved.id, states.APPROVED, "alice")
    later, _ = store.submit(proposal(vl_weights_doc(policy="c", expires_at="2024-05-01T18:00:00Z")))
    done, _ = store.submit(proposal(vl_weights_doc(policy="d")))
    store.transition(done.id, states.REJECTED, "alice")
    assert store.expire_due() == []
    clock.advance(hours=2)
    with pytest.raises(ProposalExpiredError, match="expired at 2024-05-01T14:00:00Z"):
        store.transition(pending.id, states.APPROVED, "alice")
    with pytest.raises(ProposalExpiredError):
        store.transition(approved.id, states.APPLYING, "alice")
    assert sorted(store.expire_due()) == sorted([pending.id, approved.id])
    assert [store.get(p.id).state for p in (pending, approved, later, done)] == [
        "expired",
        "expired",
        "pending",
        "rejected",
    ]
    last = store.audit(approved.id)[-1]
    assert (last.who, last.from_state, last.to_state) == (SYSTEM, "approved", "expired")
    assert store.expire_due() == []


def test_restart_finds_every_state_and_the_audit_log(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    store = open_store(path)
    ids = {}
    for index, state in enumerate(states.STATES):
        stored, _ = store.submit(proposal(vl_weights_doc(policy=f"p{index}")))
        for step in PATHS[state]:
            store.transition(stored.id, step, "alice")
        ids[state] = stored.id
    store.record_step(ids[states.APPLYING], "write opensm.conf", "sha256 abc")
    audit = store.audit()
    store.close()
    with Store(path, create=False) as again:
        assert {state: again.get(pid).state for state, pid in ids.items()} == {s: s for s in states.STATES}
        assert again.audit() == audit
        assert [s.step for s in again.steps(ids[states.APPLYING])] == ["write opensm.conf"]
        assert [p.id for p in again.in_flight()] == [ids[states.APPLYING]]


def test_audit_and_steps_are_append_only(store: Store, tmp_path: Path) -> None:
    stored = drive(store, states.APPROVED)
    store.record_step(stored.id, "plan")
    store.close()
    conn = sqlite3.connect(tmp_path / "p.db")
    for statement in (
        "UPDATE audit SET who = 'mallory'",
        "DELETE FROM audit",
        "UPDATE steps SET detail = 'x'",
        "DELETE FROM steps",
        "DELETE FROM proposals",
        "UPDATE proposals SET body = '{}'",
        "UPDATE proposals SET proposer = 'mallory'",
    ):
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute(statement)
    conn.close()


def test_steps(store: Store) -> None:
    stored = drive(store, states.APPLYING)
    first = store.record_step(stored.id, "drain a1", "deadline 600 s")
    second = store.record_step(stored.id, "scontrol update", "ok")
    records = store.steps(stored.id)
    assert [r.seq for r in records] == [first, second]
    assert records[0].to_dict()["detail"] == "deadline 600 s"
    with pytest.raises(UnknownProposalError):
        store.record_step("0" * 64, "x")
    with pytest.raises(ValueError, match="a step needs a name"):
        store.record_step(stored.id, "")


def test_resolve_prefix(store: Store) -> None:
    ids = [store.submit(proposal(vl_weights_doc(policy=f"p{i}")))[0].id for i in range(40)]
    target = ids[0]
    assert store.resolve(target[:12]) == target
    assert store.resolve(target.upper()) == target
    shared = next(a[0] for a in ids if sum(b.startswith(a[0]) for b in ids) > 1)
    with pytest.raises(AmbiguousIdError, match="give more digits"):
        store.resolve(shared)
    with pytest.raises(UnknownProposalError):
        store.resolve("xyz")
    with pytest.raises(UnknownProposalError):
        store.resolve("")


def test_list_filter_counts_and_oldest_pending(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path / "p.db", clock)
    assert oldest_pending_age_seconds(store) is None
    first, _ = store.submit(proposal())
    clock.advance(minutes=5)
    second, _ = store.submit(proposal(vl_weights_doc(policy="b")))
    store.transition(second.id, states.REJECTED, "bob")
    clock.advance(minutes=5)
    assert [p.id for p in store.list_proposals()] == [first.id, second.id]
    assert [p.id for p in store.list_proposals("rejected")] == [second.id]
    counts = proposal_counts(store)
    assert counts == dict.fromkeys(states.STATES, 0) | {"pending": 1, "rejected": 1}
    assert oldest_pending_age_seconds(store) == 600.0
    with pytest.raises(ValueError, match="unknown state"):
        store.list_proposals("done")


def test_refuses_files_that_are_not_stores(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no proposal store"):
        Store(tmp_path / "missing.db", create=False)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StoreError):
        Store(junk)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a proposal store"):
        Store(other)


def test_altered_body_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    with open_store(path) as store:
        stored = drive(store, states.PENDING)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER proposals_frozen")
    conn.execute("UPDATE proposals SET body = replace(body, '0:48', '0:99')")
    conn.commit()
    conn.close()
    with open_store(path) as store, pytest.raises(StoreError, match="does not match its id"):
        store.get(stored.id)


def test_durability_settings(store: Store) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000


def test_two_stores_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    clock = FakeClock()
    first, second = Store(path, clock=clock), Store(path, busy_timeout_s=0.05, clock=clock)
    stored, _ = first.submit(proposal())
    assert second.get(stored.id).state == states.PENDING
    second.transition(stored.id, states.APPROVED, "alice")
    assert first.get(stored.id).state == states.APPROVED
    first._conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="cannot start a write"):
        second.transition(stored.id, states.APPLYING, "hooks")
    first._conn.execute("ROLLBACK")
    assert second.transition(stored.id, states.APPLYING, "hooks").state == states.APPLYING
    first.close()
    second.close()
