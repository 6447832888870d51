"""The checker's flow for the integration tests: proposal files, `ibpool proposals` and `ibpool apply`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proposals.cli import main as proposals_main
from proposals.store import Store
from scheduler_hooks.apply.cli import main as apply_main
from tests.integration.slurm_cluster import SlurmCluster
from tests.proposals.factory import logged_in

REPO = Path(__file__).resolve().parents[3]


class Flow:
    """Runs the commands as a person would, with $IBPOOL_DB set and the output captured."""

    def __init__(self, tmp: Path, capsys: pytest.CaptureFixture[str], config: Path) -> None:
        self.tmp = tmp
        self.capsys = capsys
        self.config = config
        self.db = tmp / "ibpool.db"
        self.files = 0

    def proposal_file(
        self, kind: str, changes: Sequence[tuple[str, str, str]], effect: str = "test", reclaim: str = ""
    ) -> Path:
        """A proposal file as the recommender writes it (created now, expiring in an hour; `reclaim`: the
        nodes it takes back by reclaim)."""
        now = datetime.now(UTC).replace(microsecond=0)
        doc: dict[str, Any] = {
            "kind": kind,
            "changes": [{"target": t, "before": b, "after": a} for t, b, a in changes],
            "evidence": [
                {"query": "pool:ib_port_wait:ratio5m", "window": "15m", "value": 0.4, "threshold": 0.3}
            ],
            "expected_effect": effect,
            "created_at": now.isoformat().replace("+00:00", "Z"),
            "expires_at": (now + timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
            "policy": "integration",
        }
        if reclaim:
            doc["reclaim"] = reclaim
        self.files += 1
        path = self.tmp / f"proposal{self.files}.json"
        path.write_text(json.dumps(doc, indent=2))
        return path

    def proposals(self, *argv: str) -> tuple[int, str, str]:
        """`ibpool proposals ARGV`."""
        code = proposals_main(list(argv))
        out, err = self.capsys.readouterr()
        return code, out, err

    def apply(self, *argv: str) -> tuple[int, str, str]:
        """`ibpool apply ARGV --config FILE`."""
        code = apply_main([*argv, "--config", str(self.config)])
        out, err = self.capsys.readouterr()
        return code, out, err

    def submit_and_approve(self, path: Path) -> str:
        """`proposals submit FILE --by alice`, then `proposals approve ID --by bob`; the id."""
        with logged_in("alice"):
            code, out, err = self.proposals("submit", str(path), "--by", "alice")
        assert code == 0, err
        pid = out.strip()
        with logged_in("bob"):
            code, out, err = self.proposals("approve", pid, "--by", "bob")
        assert code == 0 and out.split() == [pid, "approved"], err
        return pid

    def crash(self, step: str, nth: int, *argv: str) -> None:
        """`ibpool apply ARGV` in a child process killed (-9) right after the NTH record of STEP."""
        command = [sys.executable, "-m", "tests.scheduler_hooks.apply.crash_cli", step, str(nth)]
        command += [*argv, "--config", str(self.config)]
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]

    def store(self) -> Store:
        """The proposal store, opened for reading."""
        return Store(self.db, create=False)

    def steps(self, pid: str) -> list[str]:
        """The step names recorded for a proposal."""
        with self.store() as store:
            return [s.step for s in store.steps(pid)]

    def details(self, pid: str, step: str) -> list[dict[str, Any]]:
        """The decoded detail of every record of `step` for a proposal."""
        with self.store() as store:
            return [json.loads(s.detail) for s in store.steps(pid) if s.step == step]

    def history(self, pid: str) -> list[tuple[str | None, str, str]]:
        """(from, to, result) of every audit entry of a proposal."""
        with self.store() as store:
            return [(e.from_state, e.to_state, e.result) for e in store.audit(pid)]


def sinfo(cluster: SlurmCluster) -> dict[str, list[str]]:
    """Partition -> nodes, read back with our own sinfo call (node counts checked)."""
    out = cluster.run("sinfo", "--noheader", "--all", "--format=%R %D %N").stdout
    members = {}
    for line in out.splitlines():
        name, count, *nodes = line.split()
        members[name] = cluster.run("scontrol", "show", "hostnames", *nodes).stdout.split() if nodes else []
        assert len(members[name]) == int(count)
    return members
