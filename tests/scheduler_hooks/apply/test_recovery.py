"""Recovery after a crash (kill -9) right after every durable write of an apply, with fake sides.

Each case dies after the k-th step record or transition, then a fresh orchestrator recovers: the proposal
ends `applied` with every target at `after`, or `rolled_back` with every target at `before`; never in
between, and the audit log and step records hold the whole story.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from proposals.store import Store
from tests.proposals.factory import FakeClock
from tests.scheduler_hooks.apply.fakes import (
    MOVE_OSM,
    MOVE_SLURM,
    Crash,
    CrashingStore,
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
Setup = Callable[[FakeSide, FakeSide], None]


def _ok(slurm: FakeSide, opensm: FakeSide) -> None:
    """A run that succeeds."""


def _second_side_fails(slurm: FakeSide, opensm: FakeSide) -> None:
    opensm.fail_at = 2


def _run(tmp: Path, setup: Setup, crash_after: int | None) -> tuple[CrashingStore, str, dict[str, str], bool]:
    """Apply with a crash after `crash_after` writes; (store, id, live, crashed)."""
    live = live_before(MOVE)
    slurm, opensm = FakeSide("slurm", live), FakeSide("opensm", live)
    setup(slurm, opensm)
    store = CrashingStore(tmp / "ibpool.db", FakeClock())
    pid = approved(store, proposal(MOVE))
    store.writes, store.crash_after = [], crash_after
    try:
        orchestrator(store, [opensm, slurm], tmp).apply(pid)
    except Crash:
        return store, pid, live, True
    return store, pid, live, False


def _writes(tmp: Path, setup: Setup) -> list[str]:
    tmp.mkdir()
    store, _, _, crashed = _run(tmp, setup, None)
    assert not crashed
    return store.writes


@pytest.mark.parametrize(("setup", "final"), [(_ok, "applied"), (_second_side_fails, "rolled_back")])
def test_recovery_after_a_crash_at_every_step(setup: Setup, final: str, tmp_path: Path) -> None:
    writes = _writes(tmp_path / "reference", setup)
    assert len(writes) > 10
    outcomes: dict[str, str] = {}
    for k, write in enumerate(writes, 1):
        case = tmp_path / f"crash{k}"
        case.mkdir()
        store, pid, live, crashed = _run(case, setup, k)
        assert crashed
        store.crash_after = None
        slurm, opensm = FakeSide("slurm", live), FakeSide("opensm", live)  # a fresh process
        recovered = orchestrator(Store(case / "ibpool.db"), [opensm, slurm], case).recover()
        state = store.get(pid).state
        if write == f"-> {final}":
            assert recovered == [] and state == final  # the crash came after the last write
        else:
            assert [(o.proposal_id, o.result, o.recovered) for o in recovered] == [(pid, state, True)], write
        assert state in ("applied", "rolled_back"), write
        assert values(live, MOVE, 2 if state == "applied" else 1), (write, live)
        assert store.in_flight() == []
        history = transitions(store, pid)
        assert history[2] == ("approved", "applying", "ok")
        assert history[-1][1:] == (state, "ok")
        outcomes[f"{k}:{write}"] = state
        # Nothing left for the next run.
        assert orchestrator(store, [opensm, slurm], case).recover() == []
    if final == "applied":
        # Before the last side's `set` of its last change was recorded: rolled back; after: completed.
        assert "rolled_back" in outcomes.values() and "applied" in outcomes.values()
    else:
        assert set(outcomes.values()) == {"rolled_back"}


def test_the_next_apply_recovers_first(tmp_path: Path) -> None:
    store, pid, live, _ = _run(tmp_path, _ok, 9)  # dies after opensm's `planned`... or wherever step 9 is
    store.crash_after = None
    other = approved(store, proposal([("slurm.partition.c.nodes", "n7", "n7,n8")]))
    live["slurm.partition.c.nodes"] = "n7"
    slurm, opensm = FakeSide("slurm", live), FakeSide("opensm", live)
    outcome, recovered = orchestrator(store, [opensm, slurm], tmp_path).apply(other)
    assert [(o.proposal_id, o.recovered) for o in recovered] == [(pid, True)]
    assert store.get(pid).state in ("applied", "rolled_back")
    assert outcome.result == "applied" and live["slurm.partition.c.nodes"] == "n7,n8"


def test_recovering_the_proposal_being_applied_reports_its_recovery(tmp_path: Path) -> None:
    store, pid, live, _ = _run(tmp_path, _ok, 4)
    store.crash_after = None
    slurm, opensm = FakeSide("slurm", live), FakeSide("opensm", live)
    outcome, recovered = orchestrator(store, [opensm, slurm], tmp_path).apply(pid)
    assert outcome.recovered and outcome.result in ("applied", "rolled_back") and recovered == []


def test_an_interrupted_apply_without_its_side_configured_blocks_other_applies(tmp_path: Path) -> None:
    store, pid, live, _ = _run(tmp_path, _ok, 4)
    store.crash_after = None
    other = approved(store, proposal([("opensm.vlarb_high", "0:4", "0:8")], kind="set_vl_weights"))
    live["opensm.vlarb_high"] = "0:4"
    outcome, recovered = orchestrator(store, [FakeSide("opensm", live)], tmp_path).apply(other)
    assert [o.result for o in recovered] == ["failed"]
    assert "cannot recover it with this config" in recovered[0].message
    assert outcome.result == "refused" and "could not be recovered" in outcome.message
    assert store.get(pid).state == "applying" and store.get(other).state == "approved"


def test_the_audit_trail_shows_every_step_of_a_recovered_apply(tmp_path: Path) -> None:
    store, pid, live, _ = _run(tmp_path, _ok, 5)  # after slurm's first `set`
    store.crash_after = None
    slurm, opensm = FakeSide("slurm", live), FakeSide("opensm", live)
    orchestrator(store, [opensm, slurm], tmp_path).recover(pid)
    assert step_names(store, pid) == [
        "apply.start",
        "apply.begin",
        "slurm.planned",
        "slurm.set",
        "slurm.rolled_back",
        "apply.failed",
        "apply.rollback",
        "apply.rollback_end",
    ]
    assert transitions(store, pid)[-2:] == [("applying", "failed", "ok"), ("failed", "rolled_back", "ok")]
    assert store.audit(pid)[-1].detail.startswith(
        "rolled back after: slurm: interrupted; recovery rolled it back"
    )
    assert values(live, MOVE, 1)
