"""ibpool_changes_applied_total from the audit log: every pair from the start, per system changed."""

from __future__ import annotations

from pathlib import Path

from foundation.exposition import render
from proposals.store import Store
from scheduler_hooks.apply.metrics import changes_applied_counts, changes_applied_family, systems
from tests.helpers import samples_of
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
)

NAME = "ibpool_changes_applied_total"


def test_counts(tmp_path: Path) -> None:
    store = Store(tmp_path / "ibpool.db", clock=FakeClock())
    assert set(changes_applied_counts(store).values()) == {0} and len(changes_applied_counts(store)) == 6
    live = live_before([*MOVE_SLURM, *MOVE_OSM, WEIGHTS])
    slurm, opensm = FakeSide("slurm", live), FakeSide("opensm", live)
    weights = approved(store, proposal([WEIGHTS], kind="set_vl_weights"))
    move = approved(store, proposal(MOVE_SLURM + MOVE_OSM))
    assert systems(store.get(move).proposal) == ("opensm", "slurm")
    orchestrator(store, [opensm, slurm], tmp_path).apply(weights)
    opensm.fail_at = 1
    orchestrator(store, [opensm, slurm], tmp_path).apply(move)
    assert changes_applied_counts(store) == {
        ("opensm", "applied"): 1,
        ("opensm", "failed"): 1,
        ("opensm", "rolled_back"): 1,
        ("slurm", "applied"): 0,
        ("slurm", "failed"): 1,
        ("slurm", "rolled_back"): 1,
    }
    text = render([changes_applied_family(store)])
    assert f"# TYPE {NAME} counter" in text
    samples = samples_of(text, NAME)
    assert samples[(("result", "applied"), ("target", "slurm"))] == 0
    assert samples[(("result", "rolled_back"), ("target", "opensm"))] == 1


def test_the_name_matches_the_alerting_contract() -> None:
    text = (Path(__file__).resolve().parents[3] / "alerts" / "external" / "metrics.yaml").read_text()
    assert (
        f"- name: {NAME}\n    type: counter\n    labels: [target, result]\n    producer: scheduler_hooks"
        in text
    )
