"""The simulated sides: the real apply orchestrator changes the simulated cluster over its HTTP controls."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proposals import approval
from proposals.approval_config import BlastRadius
from proposals.model import Change, Proposal
from proposals.store import Store
from scheduler_hooks.apply.orchestrator import Orchestrator
from scheduler_hooks.apply.sides import Side
from simulator.backends.simulated_side import SimulatedQosSide, SimulatedSlurmSide
from simulator.cluster import ClusterModel, scenarios
from simulator.serve.cluster_server import ClusterServer, ServerSettings

DEFAULT_LOW = "0:64,1:64"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ClusterServer, str]]:
    model = ClusterModel(scenarios.shared_uplink_spec(), [scenarios.chatty("lo", gpus=8, work=60.0)])
    model.advance(10.0)  # the `lo` job runs on one of its nodes
    server = ClusterServer(
        model, ServerSettings(listen_address="127.0.0.1:0", speed=0.0, workdir=tmp_path / "nodes")
    )
    server.start()
    try:
        yield server, f"http://127.0.0.1:{server.port}"
    finally:
        server.close()


def _orchestrator(tmp_path: Path, store: Store, base: str) -> Orchestrator:
    sides: list[Side] = [SimulatedQosSide(base), SimulatedSlurmSide(base, advance_seconds=20.0)]
    return Orchestrator(store, sides, limits=BlastRadius(), who="alice", state_dir=tmp_path / "apply")


def _approved(store: Store, kind: str, changes: list[tuple[str, str, str]]) -> str:
    now = datetime.now(UTC).replace(microsecond=0)
    proposal = Proposal(
        kind=kind,  # type: ignore[arg-type]
        changes=tuple(Change(*c) for c in changes),
        evidence=(),
        expected_effect="test",
        created_at=now,
        expires_at=now + timedelta(hours=1),
        policy="test",
    )
    stored, _ = store.submit(proposal, actor="unix:recommender")
    approval.approve(store, stored.id, "bob", actor="unix:bob")
    return stored.id


def test_vl_weights_are_posted_and_read_back(tmp_path: Path, cluster: tuple[ClusterServer, str]) -> None:
    server, base = cluster
    side = SimulatedQosSide(base)
    assert side.read("opensm.vlarb_low") == DEFAULT_LOW
    with Store(tmp_path / "db") as store:
        pid = _approved(store, "set_vl_weights", [("opensm.vlarb_low", DEFAULT_LOW, "0:32,1:96")])
        outcome, _ = _orchestrator(tmp_path, store, base).apply(pid)
        assert outcome.result == "applied", outcome.message
        assert [s.step for s in store.steps(pid)] == [
            "apply.start",
            "apply.begin",
            "opensm.posted",
            "opensm.verified",
            "apply.done",
        ]
    with server.runner.locked() as model:
        assert model.vl_weights()[:2] == (32, 96)
    assert side.read("opensm.vlarb_low") == "0:32,1:96"


def test_a_stale_proposal_is_refused_and_nothing_changes(
    tmp_path: Path, cluster: tuple[ClusterServer, str]
) -> None:
    _, base = cluster
    with Store(tmp_path / "db") as store:
        pid = _approved(store, "set_vl_weights", [("opensm.vlarb_low", "0:10,1:10", "0:20,1:20")])
        outcome, _ = _orchestrator(tmp_path, store, base).apply(pid)
    assert outcome.result == "refused"
    assert "stale" in outcome.message
    assert SimulatedQosSide(base).read("opensm.vlarb_low") == DEFAULT_LOW


def test_a_node_move_drains_waits_sets_resumes_and_reads_back(
    tmp_path: Path, cluster: tuple[ClusterServer, str]
) -> None:
    server, base = cluster
    with server.runner.locked() as model:
        busy = [n for n in model.partition_nodes("lo") if model.scheduler_view().nodes[n].state != "idle"]
    assert busy, "the lo job runs on one of lo's nodes"
    node = busy[0]
    others = {"node0002", "node0006"} - {node}
    changes = [
        ("slurm.partition.lo.nodes", "node0002,node0006", ",".join(sorted(others))),
        ("slurm.partition.hi.nodes", "node0001,node0005", ",".join(sorted({"node0001", "node0005", node}))),
    ]
    with Store(tmp_path / "db") as store:
        pid = _approved(store, "move_nodes", changes)
        outcome, _ = _orchestrator(tmp_path, store, base).apply(pid)
        assert outcome.result == "applied", outcome.message
        steps = [s.step for s in store.steps(pid)]
    assert steps[2:6] == ["slurm.draining", "slurm.setting", "slurm.resumed", "slurm.verified"]
    with server.runner.locked() as model:
        assert node in model.partition_nodes("hi")
        assert node not in model.partition_nodes("lo")
        assert model.scheduler_view().nodes[node].state == "idle"  # its job ended while it drained; resumed
        assert model.now > 10.0  # the side advanced the frozen clock while it waited


def test_validation_refuses_unknown_nodes_and_empty_partitions(
    tmp_path: Path, cluster: tuple[ClusterServer, str]
) -> None:
    _, base = cluster
    side = SimulatedSlurmSide(base)
    problems = side.validate(
        [
            Change("slurm.partition.lo.nodes", "node0002,node0006", ""),
            Change("slurm.partition.hi.nodes", "node0001,node0005", "node0001,node0005,node0099"),
        ]
    )
    assert any("empty" in p for p in problems)
    assert any("node0099" in p for p in problems)
    assert SimulatedQosSide(base).validate([Change("opensm.vlarb_low", DEFAULT_LOW, "0:300")])


def test_rollback_puts_the_tables_back(tmp_path: Path, cluster: tuple[ClusterServer, str]) -> None:
    _, base = cluster
    side = SimulatedQosSide(base)
    changes = [Change("opensm.vlarb_low", DEFAULT_LOW, "0:16,1:112")]
    recorded: list[tuple[str, dict[str, object]]] = []

    def sink(step: str, detail: Mapping[str, Any]) -> None:
        recorded.append((step, dict(detail)))

    assert side.apply("p", changes, sink).value == "applied"
    side.rollback("p", changes, recorded, sink)
    assert side.read("opensm.vlarb_low") == DEFAULT_LOW
    assert [step for step, _ in recorded] == ["posted", "verified", "restored"]
