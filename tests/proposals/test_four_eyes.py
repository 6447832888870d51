"""Four eyes by real identity: a typed `--by` proves nothing; the OS account (or SUDO_USER under root) does.

The CLI tests run `python -m ibpool proposals` as real processes; the ones that need a second account
switch to `nobody` with setpriv and so need root (they are skipped otherwise).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation.identity import account_name, os_actor
from proposals import approval, schema, states
from proposals.approval_config import ApprovalConfig, AutoApprove, VlWeightBounds
from proposals.errors import ApprovalRefusedError
from proposals.store import Store
from proposals.timestamps import format_sortable
from tests.proposals.factory import T0, FakeClock, open_store, proposal, vl_weights_doc

REPO = Path(__file__).resolve().parents[2]
FUTURE = {"created_at": "2024-05-01T12:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}
NOBODY = 65534
as_root = pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv for a second account"
)


def cli(
    db: Path, *argv: str, uid: int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`ibpool proposals --db DB ARGV` as a real process, as account `uid` (default: this one)."""
    prefix: list[str] = []
    if uid is not None:
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    environment = {k: v for k, v in os.environ.items() if k != "SUDO_USER"} | (env or {})
    command = [*prefix, sys.executable, "-m", "ibpool", "proposals", "--db", str(db), *argv]
    return subprocess.run(
        command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every account may write (a site would use a group; the test has only `nobody`)."""
    path = Path(tempfile.mkdtemp(prefix="ibpool-four-eyes-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def proposal_file(directory: Path) -> Path:
    path = directory / "p.json"
    path.write_text(json.dumps(vl_weights_doc(**FUTURE)))
    path.chmod(0o644)
    return path


def submitted(db: Path, directory: Path, by: str, uid: int | None = None) -> str:
    result = cli(db, "submit", str(proposal_file(directory)), "--by", by, uid=uid)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def audit(db: Path, pid: str) -> list[tuple[str, str, str, str]]:
    entries = json.loads(cli(db, "audit", pid, "--json").stdout)
    return [(e["who"], e["actor"], e["to_state"], e["result"]) for e in entries]


def test_one_account_under_two_names_is_refused(tmp_path: Path) -> None:
    """The probe: the same Unix user ran `submit --by alice` and `approve --by bob`."""
    db = tmp_path / "p.db"
    me = str(os_actor())
    pid = submitted(db, tmp_path, "alice")
    result = cli(db, "approve", pid, "--by", "bob")
    assert result.returncode == 1, result.stdout
    assert "the approver must not be the proposer" in result.stderr
    assert "Traceback" not in result.stderr
    assert audit(db, pid) == [
        ("alice", me, "pending", "ok"),
        ("bob", me, "pending", "refused"),
    ]
    assert json.loads(cli(db, "show", pid).stdout)["state"] == states.PENDING


@as_root
def test_two_accounts_approve_and_both_names_are_recorded(shared_dir: Path) -> None:
    db = shared_dir / "p.db"
    nobody = account_name(NOBODY)
    pid = submitted(db, shared_dir, "alice", uid=NOBODY)
    result = cli(db, "approve", pid, "--by", "bob")
    assert result.returncode == 0, result.stderr
    assert audit(db, pid) == [
        ("alice", f"unix:{nobody}", "pending", "ok"),
        ("bob", "unix:root", "approved", "ok"),
    ]


@as_root
def test_sudo_user_is_the_person_behind_root(shared_dir: Path) -> None:
    db = shared_dir / "p.db"
    nobody = account_name(NOBODY)
    pid = submitted(db, shared_dir, "alice", uid=NOBODY)
    # What sudo sets when `nobody` runs `sudo ibpool proposals approve`: root acting for nobody.
    result = cli(db, "approve", pid, "--by", "bob", env={"SUDO_USER": nobody})
    assert result.returncode == 1 and "the approver must not be the proposer" in result.stderr
    # SUDO_USER set by an ordinary account proves nothing: nobody claiming to be carol is still nobody.
    other = cli(db, "approve", pid, "--by", "carol", uid=NOBODY, env={"SUDO_USER": "carol"})
    assert other.returncode == 1 and "the approver must not be the proposer" in other.stderr
    assert audit(db, pid)[1:] == [
        ("bob", f"unix:{nobody} (via sudo as root)", "pending", "refused"),
        ("carol", f"unix:{nobody} (SUDO_USER=carol not trusted)", "pending", "refused"),
    ]


@as_root
def test_concurrent_approvals_by_different_people_approve_once(shared_dir: Path) -> None:
    db = shared_dir / "p.db"
    pid = submitted(db, shared_dir, "alice", uid=NOBODY)
    command = [sys.executable, "-m", "ibpool", "proposals", "--db", str(db), "approve", pid]
    env = {k: v for k, v in os.environ.items() if k != "SUDO_USER"}
    runs = [
        subprocess.Popen([*command, "--by", f"person{n}"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for n in range(6)
    ]  # fmt: skip
    codes = sorted(run.wait(timeout=60) for run in runs)
    for run in runs:
        assert run.stderr is not None and "Traceback" not in run.stderr.read()
        for pipe in (run.stdout, run.stderr):
            assert pipe is not None
            pipe.close()
    assert codes == [0, 1, 1, 1, 1, 1]
    approvals = [entry for entry in audit(db, pid) if entry[2] == states.APPROVED]
    assert len(approvals) == 1


def test_the_library_checks_the_identity_it_is_given(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p.db")
    pid = store.submit(proposal(), "alice", actor="http:carol")[0].id
    with pytest.raises(ApprovalRefusedError, match="same person \\(carol\\)"):
        approval.approve(store, pid, "bob", actor="unix:Carol (via sudo as root)")
    with pytest.raises(ApprovalRefusedError, match="same person \\(carol\\)"):
        approval.approve(store, pid, "carol", actor="unix:dave")  # declared as the proposer's account
    assert approval.approve(store, pid, "bob", actor="unix:dave").state == states.APPROVED
    assert [(e.who, e.actor, e.result) for e in store.audit(pid)] == [
        ("alice", "http:carol", "ok"),
        ("bob", "unix:Carol (via sudo as root)", "refused"),
        ("carol", "unix:dave", "refused"),
        ("bob", "unix:dave", "ok"),
    ]


def test_auto_approval_is_bound_by_its_policy_not_by_who_runs_it(tmp_path: Path) -> None:
    store = open_store(tmp_path / "p.db")
    pid = store.submit(proposal())[0].id  # proposed by policy:bandwidth-quota, as this account
    config = ApprovalConfig("night", AutoApprove(set_vl_weights=VlWeightBounds(16)))
    decision = approval.auto_approve(store, pid, config)
    assert decision.approved
    assert store.audit(pid)[-1].actor == store.actor


def _version_1_store(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in schema.STATEMENTS:
        conn.execute(statement)
    conn.close()


def test_a_version_1_store_is_upgraded_and_its_old_proposals_still_work(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _version_1_store(path)
    item = proposal()
    conn = sqlite3.connect(path, isolation_level=None)
    stamps = [format_sortable(moment) for moment in (item.created_at, item.expires_at, T0, T0)]
    conn.execute(
        "INSERT INTO proposals (id, body, kind, policy, proposer, state, created_at, expires_at,"
        " submitted_at, updated_at) VALUES (?, ?, 'set_vl_weights', 'q', 'carol', 'pending', ?, ?, ?, ?)",
        (item.id, item.canonical_json().decode(), *stamps),
    )
    conn.execute(
        "INSERT INTO audit (at, who, proposal_id, from_state, to_state, result, detail)"
        " VALUES (?, 'carol', ?, NULL, 'pending', 'ok', 'submitted')",
        (stamps[2], item.id),
    )
    conn.close()
    with Store(path, read_only=True) as old:  # read as it is, nothing written
        assert old.get(item.id).proposer_actor == "" and old.audit(item.id)[0].actor == ""
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    with Store(path, clock=FakeClock()) as store:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == schema.VERSION
        with pytest.raises(ApprovalRefusedError):
            approval.approve(store, item.id, "carol", actor="unix:dave")
        assert approval.approve(store, item.id, "bob", actor="unix:dave").state == states.APPROVED
        with pytest.raises(sqlite3.IntegrityError, match="frozen"):
            store._conn.execute("UPDATE proposals SET proposer_actor = 'unix:x'")
