"""Builders for proposals and stores used by the proposals tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from foundation.identity import Actor
from proposals.model import Proposal, from_dict
from proposals.store import Store
from proposals.targets import sorted_nodes

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def vl_weights_doc(**overrides: Any) -> dict[str, Any]:
    """A valid set_vl_weights proposal document."""
    doc: dict[str, Any] = {
        "kind": "set_vl_weights",
        "changes": [{"target": "opensm.vlarb_low", "before": "0:32,1:32", "after": "0:48,1:32"}],
        "evidence": [
            {"query": 'pool:port_wait:ratio{pool="a"}', "window": "15m", "value": 0.42, "threshold": 0.3}
        ],
        "expected_effect": "pool a all-reduce wait below 10%",
        "created_at": "2024-05-01T12:00:00Z",
        "expires_at": "2024-05-01T14:00:00Z",
        "policy": "bandwidth-quota",
    }
    doc.update(overrides)
    return doc


def move_doc(moved: int = 1, donor_size: int = 4, policy: str = "rebalance", tag: str = "") -> dict[str, Any]:
    """A valid move_nodes proposal moving the first `moved` nodes of pool a into pool b."""
    donor = [f"a{i}{tag}" for i in range(1, donor_size + 1)]
    taker = [f"b1{tag}"]
    after_donor, after_taker = donor[moved:], sorted(taker + donor[:moved])
    return {
        "kind": "move_nodes",
        "changes": [
            {"target": "slurm.partition.a.nodes", "before": ",".join(donor), "after": ",".join(after_donor)},
            {
                "target": "slurm.partition.b.nodes",
                "before": ",".join(taker),
                "after": ",".join(sorted_nodes(after_taker)),
            },
        ],
        "evidence": [{"query": 'pool:pending_gpus{pool="b"}', "window": "30m", "value": 16, "threshold": 8}],
        "expected_effect": f"pool b pending GPUs served by {moved} node(s) from pool a",
        "created_at": "2024-05-01T12:00:00Z",
        "expires_at": "2024-05-01T14:00:00Z",
        "policy": policy,
    }


def proposal(doc: dict[str, Any] | None = None) -> Proposal:
    """A Proposal from a document (the default set_vl_weights one)."""
    return from_dict(doc if doc is not None else vl_weights_doc())


@contextmanager
def logged_in(name: str) -> Iterator[None]:
    """In-process `ibpool proposals` commands run as the OS account `name` meanwhile (commands run as
    real, different accounts in tests/proposals/test_four_eyes.py)."""
    with mock.patch("proposals.cli.os_actor", lambda: Actor("unix", name)):
        yield


def open_store(path: Path, clock: FakeClock | None = None) -> Store:
    """A store at `path` on a fake clock starting at T0."""
    return Store(path, clock=clock or FakeClock())
