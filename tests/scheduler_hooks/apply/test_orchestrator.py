"""The orchestrator with fake sides: state rules, refusals (audited), two-sided applies and rollbacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from proposals import approval
from proposals.approval_config import BlastRadius
from proposals.store import Store
from scheduler_hooks.apply import dryrun
from scheduler_hooks.apply.orchestrator import ApplyBusyError
from scheduler_hooks.apply.sides import UnconfiguredTargetsError
from tests.proposals.factory import FakeClock
from tests.scheduler_hooks.apply.fakes import (
    MOVE_OSM,
    MOVE_SLURM,
    WEIGHTS,
    FakeSide,
    approved,
    live_before,
    orchestrator,
    proposal,
    step_names,
    transitions,
    values,
)

MOVE = MOVE_SLURM + MOVE_OSM
APPLY_RUN = [
    "apply.start",
    "apply.begin",
    "slurm.planned",
    "slurm.set",
    "slurm.set",
    "slurm.verified",
    "apply.done",
    "apply.begin",
    "opensm.planned",
    "opensm.set",
    "opensm.set",
    "opensm.verified",
    "apply.done",
]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Store:
    return Store(tmp_path / "ibpool.db", clock=clock)


@pytest.fixture
def live() -> dict[str, str]:
    return live_before(MOVE)


@pytest.fixture
def slurm(live: dict[str, str]) -> FakeSide:
    return FakeSide("slurm", live)


@pytest.fixture
def opensm(live: dict[str, str]) -> FakeSide:
    return FakeSide("opensm", live)


def test_two_sided_move_applies_in_listed_order_with_every_step_recorded(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE))
    outcome, recovered = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert (outcome.result, outcome.exit_code, recovered) == ("applied", 0, [])
    assert outcome.message == "applied and verified (slurm applied, opensm applied)"
    assert slurm.reclaims == [()]  # no reclaim: every leaving node drains
    assert values(live, MOVE, 2)
    assert step_names(store, pid) == APPLY_RUN
    assert transitions(store, pid)[-2:] == [("approved", "applying", "ok"), ("applying", "applied", "ok")]
    assert store.audit(pid)[-1].who == "carol"


def test_applying_again_changes_nothing(
    store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE))
    orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    steps, audit = store.steps(pid), store.audit(pid)
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert (outcome.result, outcome.exit_code) == ("already_applied", 0)
    assert "nothing changed" in outcome.message
    assert store.steps(pid) == steps and store.audit(pid) == audit
    assert slurm.calls == opensm.calls == ["apply"]


def test_targets_already_at_after_are_marked_applied_without_touching_anything(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    live.update({t: a for t, _, a in MOVE})
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert (outcome.result, outcome.exit_code) == ("in_effect", 0)
    assert slurm.calls == opensm.calls == []
    assert step_names(store, pid) == ["apply.in_effect"]
    assert transitions(store, pid)[-2:] == [("approved", "applying", "ok"), ("applying", "applied", "ok")]


@pytest.mark.parametrize("state", ["pending", "rejected"])
def test_only_approved_proposals_are_applied(
    state: str, store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    stored, _ = store.submit(proposal(MOVE), "alice")
    if state == "rejected":
        approval.reject(store, stored.id, "bob")
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(stored.id)
    assert (outcome.result, outcome.exit_code) == ("refused", 1)
    assert outcome.reasons == (f"it is {state}; only an approved proposal is applied",)
    assert store.get(stored.id).state == state and slurm.calls == []


def test_an_expired_proposal_is_refused_and_expired(
    store: Store, clock: FakeClock, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE, hours=1))
    clock.advance(hours=1)
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.result == "refused" and "expired at 2024-05-01T13:00:00Z" in outcome.message
    assert store.get(pid).state == "expired" and slurm.calls == []
    assert transitions(store, pid)[-1] == ("approved", "expired", "ok")


def test_a_stale_proposal_is_refused_and_the_refusal_audited(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    live["slurm.partition.b.nodes"] = "n3,n4"
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert (outcome.result, outcome.exit_code) == ("refused", 1)
    assert outcome.reasons == (
        "stale: slurm.partition.b.nodes is 'n3,n4' live, neither before 'n3' nor after 'n2,n3'",
    )
    last = store.audit(pid)[-1]
    assert (last.from_state, last.to_state, last.result, last.who) == (
        "approved",
        "approved",
        "refused",
        "carol",
    )
    assert last.detail.startswith("refused applying: stale: slurm.partition.b.nodes")
    assert store.get(pid).state == "approved" and store.steps(pid) == []
    assert slurm.calls == opensm.calls == [] and live["slurm.partition.a.nodes"] == "n1,n2"


def test_blast_radius_is_checked_again_before_applying(
    store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE))
    tight = BlastRadius(max_nodes_moved_per_hour=0)
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path, tight).apply(pid)
    assert outcome.result == "refused"
    assert outcome.reasons[0].startswith("blast radius: moves 1 node(s)")
    assert store.audit(pid)[-1].result == "refused" and store.get(pid).state == "approved"
    assert slurm.calls == []


def test_every_validation_problem_of_both_sides_is_listed_and_nothing_touched(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    slurm.problems = ["slurm: no partition a", "slurm: no node n2"]
    opensm.problems = ["opensm.partition.a.members: unknown GUID"]
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.reasons == (
        "slurm: no partition a",
        "slurm: no node n2",
        "opensm.partition.a.members: unknown GUID",
    )
    assert values(live, MOVE, 1) and slurm.calls == opensm.calls == []
    assert "slurm: no node n2" in store.audit(pid)[-1].detail


def test_an_unreadable_live_state_is_refused(
    store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    opensm.fail_read = True
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.reasons == ("cannot read the live state: opensm: cannot read",)
    assert store.get(pid).state == "approved"


def test_second_side_failing_rolls_back_the_first(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    opensm.fail_at = 2
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert (outcome.result, outcome.exit_code) == ("rolled_back", 3)
    assert "opensm: set opensm.partition.b.members failed; undone" in outcome.message
    assert values(live, MOVE, 1)
    assert step_names(store, pid)[-10:] == [
        "apply.begin",
        "opensm.planned",
        "opensm.set",
        "opensm.rolled_back",
        "apply.failed",
        "apply.rollback",
        "apply.undo",
        "slurm.rolled_back",
        "apply.undone",
        "apply.rollback_end",
    ]
    assert transitions(store, pid)[-3:] == [
        ("approved", "applying", "ok"),
        ("applying", "failed", "ok"),
        ("failed", "rolled_back", "ok"),
    ]
    assert opensm.calls == ["apply"]  # undone by itself: not rolled back twice


def test_first_side_failing_leaves_the_second_untouched(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    slurm.fail_at = 1
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.result == "rolled_back" and opensm.calls == []
    assert values(live, MOVE, 1)


def test_a_failed_side_that_could_not_undo_itself_is_rolled_back_too(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    opensm.fail_at, opensm.no_undo = 2, True
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.result == "rolled_back" and values(live, MOVE, 1)
    assert opensm.calls == ["apply", "rollback"] and slurm.calls == ["apply", "rollback"]


def test_a_failed_rollback_leaves_the_proposal_failed_with_the_reason_audited(
    store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    opensm.fail_at, slurm.fail_rollback = 1, True
    pid = approved(store, proposal(MOVE))
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert (outcome.result, outcome.exit_code) == ("failed", 4)
    assert outcome.reasons == ("slurm: rollback failed",)
    assert store.get(pid).state == "failed"
    last = store.audit(pid)[-1]
    assert (last.to_state, last.result) == ("failed", "refused")
    assert "rollback failed: slurm: rollback failed" in last.detail
    # Nothing more to do on the next run: an operator takes over.
    again, recovered = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert recovered == [] and again.result == "refused"


def test_a_single_side_proposal_uses_only_its_side(store: Store, opensm: FakeSide, tmp_path: Path) -> None:
    weights = FakeSide("opensm", live_before([WEIGHTS]))
    pid = approved(store, proposal([WEIGHTS], kind="set_vl_weights"))
    outcome, _ = orchestrator(store, [weights], tmp_path).apply(pid)
    assert outcome.result == "applied" and weights.live[WEIGHTS[0]] == WEIGHTS[2]


def test_targets_without_a_configured_side_are_a_config_error(
    store: Store, opensm: FakeSide, tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE))
    with pytest.raises(UnconfiguredTargetsError) as caught:
        orchestrator(store, [opensm], tmp_path).apply(pid)
    assert caught.value.targets == ["slurm.partition.a.nodes", "slurm.partition.b.nodes"]
    assert store.get(pid).state == "approved"


def test_one_apply_at_a_time(store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path) -> None:
    pid = approved(store, proposal(MOVE))
    first = orchestrator(store, [opensm, slurm], tmp_path)
    with first._locked(), pytest.raises(ApplyBusyError, match="another ibpool apply holds"):
        orchestrator(store, [opensm, slurm], tmp_path).apply(pid)


def test_dry_run_shows_the_plan_and_changes_nothing(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE))
    audit = store.audit(pid)
    plan = dryrun.make_plan(store, [opensm, slurm], BlastRadius(), pid)
    assert plan.would_apply and plan.refusals == () and plan.state == "approved"
    assert [(t.target, t.side, t.live, t.status) for t in plan.targets][:2] == [
        ("slurm.partition.a.nodes", "slurm", "n1,n2", "before"),
        ("slurm.partition.b.nodes", "slurm", "n3", "before"),
    ]
    assert dict(plan.actions)["slurm"] == (
        "set slurm.partition.a.nodes to n1",
        "set slurm.partition.b.nodes to n2,n3",
    )
    text = dryrun.render(plan)
    assert text.startswith("DRY RUN (nothing changed; add --yes to apply)") and "--yes would apply it" in text
    assert store.audit(pid) == audit and store.steps(pid) == [] and values(live, MOVE, 1)
    assert slurm.calls == opensm.calls == [] and not (tmp_path / "state").exists()


def test_a_proposals_reclaim_reaches_every_side_in_the_apply_and_the_dry_run(
    store: Store, slurm: FakeSide, opensm: FakeSide, tmp_path: Path
) -> None:
    pid = approved(store, proposal(MOVE, reclaim="n2"))
    plan = dryrun.make_plan(store, [opensm, slurm], BlastRadius(), pid)
    assert dict(plan.actions)["slurm"][-1] == "reclaim n2"
    outcome, _ = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.result == "applied"
    assert slurm.reclaims == opensm.reclaims == [("n2",)]


def test_dry_run_lists_what_would_be_refused(
    store: Store, slurm: FakeSide, opensm: FakeSide, live: dict[str, str], tmp_path: Path
) -> None:
    stored, _ = store.submit(proposal(MOVE), "alice")
    live["opensm.partition.b.members"] = "0x0000000000000009"
    slurm.problems = ["slurm: no node n2"]
    plan = dryrun.make_plan(store, [opensm, slurm], BlastRadius(max_nodes_moved_per_hour=0), stored.id)
    assert not plan.would_apply
    assert plan.refusals[0] == "it is pending; only an approved proposal is applied"
    assert plan.refusals[1].startswith("stale: opensm.partition.b.members is '0x0000000000000009' live")
    assert plan.refusals[2].startswith("blast radius: moves 1 node(s)")
    assert plan.refusals[3:] == ("slurm: no node n2",)
    assert "--yes would be REFUSED" in dryrun.render(plan)
    assert store.get(stored.id).state == "pending" and len(store.audit(stored.id)) == 1
