"""What the integrity check on open costs: opening a proposal store of N proposals, with and without
`PRAGMA quick_check`, read-write and read-only, and `backup`. Prints the figures (median of 5).

    python -m benchmarks.store_open [--proposals 5000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from proposals.model import Change, Proposal
from proposals.store import Store


def fill(path: Path, count: int) -> None:
    """`count` move proposals of 8 nodes each, every other one rejected."""
    now = datetime.now(UTC).replace(microsecond=0)
    with Store(path, actor="unix:recommender") as store:
        for n in range(count):
            nodes = [f"gpu{n:05d}-{i}" for i in range(8)]
            change = Change("slurm.partition.a.nodes", ",".join(nodes), ",".join(nodes[1:]))
            later = now + timedelta(days=1)
            proposal = Proposal("move_nodes", (change,), (), f"move {n}", now, later, "bench")
            pid = store.submit(proposal)[0].id
            if n % 2:
                store.transition(pid, "rejected", "bob", actor="unix:bob")


def median_ms(action: Callable[[], object]) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proposals", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ibpool.db"
        fill(db, args.proposals)
        print(f"store: {args.proposals} proposals, {db.stat().st_size / 1e6:.1f} MB")
        for read_only in (False, True):
            mode = "read-only " if read_only else "read-write"

            def open_close(verify: bool, read_only: bool = read_only) -> None:
                Store(db, read_only=read_only, verify=verify).close()

            checked, plain = median_ms(lambda: open_close(True)), median_ms(lambda: open_close(False))
            print(f"open {mode}: {checked:7.1f} ms with quick_check, {plain:6.1f} ms without")
        copies = iter(range(100))

        def backup() -> None:
            with Store(db, read_only=True) as store:
                store.backup(Path(tmp) / f"copy{next(copies)}.db")

        print(f"backup (open, copy, check, fsync): {median_ms(backup):.1f} ms")


if __name__ == "__main__":
    main()
