"""Store integrity: a damaged file is refused with a clear error, read commands work on a read-only store,
and `backup` makes a consistent copy. The CLI runs as real processes (a traceback would show)."""

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

from proposals import approval
from proposals.errors import StoreDamagedError, StoreError
from proposals.store import Store
from tests.helpers import mounted_tmpfs
from tests.proposals.factory import move_doc, open_store, proposal

REPO = Path(__file__).resolve().parents[2]
FUTURE = {"created_at": "2024-05-01T12:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}
NOBODY = 65534
as_root = pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root (setpriv, mount)"
)


def cli(db: Path, *argv: str, uid: int | None = None) -> subprocess.CompletedProcess[str]:
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    command = [*prefix, sys.executable, "-m", "ibpool", "proposals", "--db", str(db), *argv]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def filled_store(path: Path, count: int = 40) -> list[str]:
    """A store with `count` proposals big enough to span many pages; their ids."""
    ids = []
    with Store(path) as store:
        for n in range(count):
            doc = move_doc(1, 4, tag=f"n{n}") | FUTURE | {"expected_effect": f"effect {n} " + "x" * 2000}
            ids.append(store.submit(proposal(doc), actor="unix:recommender")[0].id)
    return ids


def damage(path: Path, page: int) -> None:
    """Garbage over one page, as a failing disk or a stray write leaves it."""
    page_size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek(page * page_size)
        f.write(bytes((n * 37 + 11) % 256 for n in range(page_size)))


@pytest.mark.parametrize("page", [1, 5, 20])
def test_a_damaged_store_is_refused_by_every_command(tmp_path: Path, page: int) -> None:
    db = tmp_path / "p.db"
    ids = filled_store(db)
    damage(db, page)
    doc = tmp_path / "new.json"
    doc.write_text(json.dumps(move_doc(1, 4, tag="new") | FUTURE))
    for argv in (
        ["list"],
        ["show", ids[-1]],
        ["audit"],
        ["approve", ids[0], "--by", "bob"],
        ["submit", str(doc)],
        ["backup", str(tmp_path / "copy.db")],
    ):
        result = cli(db, *argv)
        assert result.returncode == 2, (argv, result.stdout[:300])
        assert "damaged" in result.stderr and "Traceback" not in result.stderr, (argv, result.stderr)
        assert result.stdout == ""
    assert not (tmp_path / "copy.db").exists()


def test_a_damaged_store_raises_store_damaged(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    filled_store(db)
    root = sqlite3.connect(db).execute("SELECT rootpage FROM sqlite_master WHERE name = 'proposals'")
    damage(db, root.fetchone()[0] - 1)  # the proposals table's own b-tree page
    with pytest.raises(StoreDamagedError, match="damaged"):
        Store(db, read_only=True)
    with Store(db, read_only=True, verify=False) as store, pytest.raises(StoreDamagedError):
        store.list_proposals()  # a read that meets the damage is refused the same way


def test_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    ids = filled_store(db, 3)
    with Store(db, read_only=True) as store:
        assert [p.id for p in store.list_proposals()] == ids
        with pytest.raises(StoreError, match="read-only"):
            approval.approve(store, ids[0], "bob", actor="unix:bob")
    db.write_bytes(b"")
    with pytest.raises(StoreError, match="an empty file, not a proposal store"):
        Store(db, read_only=True)
    assert db.read_bytes() == b""


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ibpool-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        path.chmod(0o755)
        shutil.rmtree(path)


@as_root
def test_read_commands_work_on_a_read_only_file_in_a_read_only_directory(world_readable_dir: Path) -> None:
    db = world_readable_dir / "p.db"
    ids = filled_store(db, 3)
    assert not Path(f"{db}-wal").exists()  # a cleanly closed store is one file
    db.chmod(0o444)
    world_readable_dir.chmod(0o555)
    listed = cli(db, "list", "--json", uid=NOBODY)
    assert listed.returncode == 0, listed.stderr
    assert [p["id"] for p in json.loads(listed.stdout)] == ids
    shown = cli(db, "show", ids[1], uid=NOBODY)
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == ids[1]
    assert cli(db, "audit", uid=NOBODY).returncode == 0
    refused = cli(db, "approve", ids[0], "--by", "bob", uid=NOBODY)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert sorted(p.name for p in world_readable_dir.iterdir()) == ["p.db"]


@pytest.fixture
def read_only_mount() -> Iterator[Path]:
    """A small tmpfs that the test remounts read-only."""
    with mounted_tmpfs("4m", "ibpool-rofs-") as path:
        yield path


@as_root
def test_a_store_on_a_read_only_filesystem(read_only_mount: Path, tmp_path: Path) -> None:
    db = read_only_mount / "p.db"
    ids = filled_store(db, 3)
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    listed = cli(db, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [p["id"] for p in json.loads(listed.stdout)] == ids
    assert cli(db, "show", ids[0][:12]).returncode == 0
    backup = cli(db, "backup", str(tmp_path / "copy.db"))
    assert backup.returncode == 0, backup.stderr
    with Store(tmp_path / "copy.db", read_only=True) as copy:
        assert [p.id for p in copy.list_proposals()] == ids
    refused = cli(db, "approve", ids[0], "--by", "bob")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "read-only" in refused.stderr or "readonly" in refused.stderr, refused.stderr


def test_backup_is_consistent_and_never_overwrites(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    ids = filled_store(db, 5)
    with open_store(db) as writer:
        approval.approve(writer, ids[0], "bob", actor="unix:bob")
        result = cli(db, "backup", str(tmp_path / "b1.db"))  # while a writer holds the store open
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "b1.db")
    assert not Path(f"{tmp_path / 'b1.db'}-wal").exists()
    with Store(tmp_path / "b1.db", read_only=True) as copy:
        assert [p.id for p in copy.list_proposals()] == ids
        assert copy.get(ids[0]).state == "approved"
        assert len(copy.audit()) == 6
    again = cli(db, "backup", str(tmp_path / "b1.db"))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("b1", ".b1"))) == ["b1.db"]


def test_a_reader_that_goes_away_is_not_an_error(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    filled_store(db, 40)
    command = [sys.executable, "-m", "ibpool", "proposals", "--db", str(db), "list", "--json"]  # > a pipe
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    assert proc.wait(timeout=60) == 0
    assert b"Traceback" not in proc.stderr.read()
    proc.stderr.close()
