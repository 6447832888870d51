"""Helpers for the live rebalance tests: snapshots of whole 8-GPU nodes, a real store, applied moves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from proposals.model import Change, Proposal
from proposals.states import APPLIED, APPLYING, APPROVED, REJECTED
from proposals.store import Store
from proposals.targets import format_node_list, slurm_partition_nodes
from recommender.signals.model import NodeSignals, PoolSignals, Signals

T0 = 1_800_000_000.0
G = 8


class Fixed:
    """A source that hands out the snapshots given, the last one again and again."""

    name = "fixed"

    def __init__(self, *snapshots: Signals) -> None:
        self.snapshots = list(snapshots)

    def fetch(self) -> Signals:
        return self.snapshots.pop(0) if len(self.snapshots) > 1 else self.snapshots[0]

    def reset(self) -> None:
        pass


def snap(
    at: float,
    members: Mapping[str, Sequence[str]],
    busy: Sequence[str] = (),
    pending: Mapping[str, int] | None = None,
) -> Signals:
    """Pools of whole nodes (8 GPUs each); `busy` nodes are fully allocated, the others idle."""
    nodes = {
        n: NodeSignals(n, (pool,), "allocated" if n in busy else "idle", 0.5, 1.0)
        for pool, names in members.items()
        for n in names
    }
    pools = {
        pool: PoolSignals(
            pool,
            G * len(names),
            G * sum(n in busy for n in names),
            (pending or {}).get(pool, 0),
            sum(n not in busy for n in names),
            0.5,
            1.0,
        )
        for pool, names in members.items()
    }
    return Signals(at, 60.0, "test", pools, nodes)


def move(
    src: str,
    dst: str,
    nodes: Sequence[str],
    before: Mapping[str, Sequence[str]],
    *,
    at: float = T0,
    policy: str = "rebalance",
) -> Proposal:
    """A move_nodes proposal of `nodes` from `src` to `dst`, given the partitions before it."""
    created = datetime.fromtimestamp(at, UTC)
    return Proposal(
        kind="move_nodes",
        changes=(
            Change(
                slurm_partition_nodes(src),
                format_node_list(before[src]),
                format_node_list(set(before[src]) - set(nodes)),
            ),
            Change(
                slurm_partition_nodes(dst),
                format_node_list(before[dst]),
                format_node_list(set(before[dst]) | set(nodes)),
            ),
        ),
        evidence=(),
        expected_effect=f"move {', '.join(nodes)} from {src} to {dst}",
        created_at=created,
        expires_at=created + timedelta(hours=1),
        policy=policy,
    )


def advance(store: Store, pid: str, state: str) -> None:
    """Walk a pending proposal to `state` (approved, applying, applied or rejected)."""
    if state == REJECTED:
        store.transition(pid, REJECTED, "alice")
        return
    for step in (APPROVED, APPLYING, APPLIED):
        store.transition(pid, step, "alice")
        if step == state:
            return


def submit(store: Store, proposal: Proposal, state: str = APPLIED) -> str:
    """Store a proposal and walk it to `state`; its id."""
    stored, _ = store.submit(proposal)
    if state != "pending":
        advance(store, stored.id, state)
    return stored.id
