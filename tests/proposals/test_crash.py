"""A writer killed with SIGKILL at random moments leaves a consistent store that recovery can finish."""

from __future__ import annotations

import itertools
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from proposals import states
from proposals.store import Store

REPO = Path(__file__).resolve().parents[2]

# Recover interrupted applies, then run proposals through their lifecycle until killed.
WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from proposals.model import Change, Proposal
from proposals.store import Store

store = Store(sys.argv[1])
for stuck in store.in_flight():
    store.transition(stuck.id, "failed", "recovery", "interrupted apply")
for stuck in store.list_proposals("failed"):
    store.transition(stuck.id, "rolled_back", "recovery", "restored previous state")
start = datetime(2024, 5, 1, tzinfo=UTC)
round_ = sys.argv[2]
n = 0
while True:
    p = Proposal(
        "set_vl_weights",
        (Change("opensm.vlarb_low", "0:32,1:32", f"0:{n % 200 + 33},1:32"),),
        (),
        "wait below 10%",
        start,
        start + timedelta(days=36500),
        f"writer-{round_}-{n}",
    )
    pid = store.submit(p)[0].id
    store.transition(pid, "approved", "alice")
    store.transition(pid, "applying", "hooks")
    store.record_step(pid, "write", "opensm.conf")
    if n % 3:
        store.transition(pid, "applied", "hooks")
    else:
        store.transition(pid, "failed", "hooks", "verify mismatch")
        store.record_step(pid, "restore", "opensm.conf")
        store.transition(pid, "rolled_back", "hooks")
    if n == 0:
        print("ready", flush=True)
    n += 1
"""


def check_invariants(path: Path) -> dict[str, int]:
    """Integrity, and for every proposal an unbroken audit chain that ends in its state."""
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
    with Store(path, create=False) as store:
        by_proposal: dict[str, list[tuple[str | None, str, str]]] = {}
        for entry in store.audit():
            by_proposal.setdefault(entry.proposal_id, []).append(
                (entry.from_state, entry.to_state, entry.result)
            )
        stored = store.list_proposals()
        assert {p.id for p in stored} == set(by_proposal)
        for p in stored:
            chain = by_proposal[p.id]
            assert chain[0] == (None, states.PENDING, "ok")
            for (_, previous, _), (start, end, result) in itertools.pairwise(chain):
                assert start == previous
                assert end in states.TRANSITIONS[start] if result == "ok" else end == start
            assert chain[-1][1] == p.state
        return store.counts()


def test_sigkill_in_a_loop_of_transitions(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    Store(path).close()
    rng = random.Random(7)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for round_ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(round_)], stdout=subprocess.PIPE, env=env, text=True
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.15))
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        child.stdout.close()
        counts = check_invariants(path)
        assert counts[states.APPLIED] + counts[states.ROLLED_BACK] >= round_ + 1
    # The next start recovers whatever was left applying.
    Store(path).close()
    finisher = subprocess.run(
        [sys.executable, "-c", WRITER.replace("while True", "while n < 1"), str(path), "final"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert finisher.stdout == "ready\n"
    counts = check_invariants(path)
    assert counts[states.APPLYING] == counts[states.FAILED] == 0
