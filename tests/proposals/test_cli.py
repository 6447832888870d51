"""`ibpool proposals ...` end to end through main(argv) on a temporary store."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from foundation.identity import Actor
from proposals import cli
from proposals.cli import DEFAULT_DB, db_path, main
from tests.proposals.factory import move_doc, vl_weights_doc

FUTURE = {"created_at": "2024-05-01T12:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ibpool.db"


def write(tmp_path: Path, doc: dict[str, Any], name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def login(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The next commands run as the OS account `name` (tests/proposals/test_identity.py runs real ones)."""
    monkeypatch.setattr(cli, "os_actor", lambda: Actor("unix", name))


def test_review_flow(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    login(monkeypatch, "carol")
    weights = write(tmp_path, vl_weights_doc(**FUTURE))
    code, out, _ = run(capsys, "submit", str(weights), "--by", "carol", "--db", str(db))
    assert code == 0
    pid = out.strip()
    assert len(pid) == 64
    code, out, err = run(capsys, "--db", str(db), "submit", str(weights))
    assert (code, out.strip()) == (0, pid)
    assert "already submitted by carol; it is pending" in err

    moves = write(tmp_path, move_doc(1, 4) | FUTURE, "m.json")
    code, out, _ = run(capsys, "submit", str(moves), "--db", str(db))
    other = out.strip()

    code, out, _ = run(capsys, "list", "--db", str(db))
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "STATE", "KIND", "POLICY", "PROPOSER", "EXPIRES"]
    assert lines[1].split() == [
        pid[:12],
        "pending",
        "set_vl_weights",
        "bandwidth-quota",
        "carol",
        "2099-01-01T00:00:00Z",
    ]
    assert lines[2].split()[:5] == [other[:12], "pending", "move_nodes", "rebalance", "policy:rebalance"]

    code, _, err = run(capsys, "approve", pid[:10], "--by", "carol", "--db", str(db))
    assert code == 1
    assert "refused" in err and "the approver must not be the proposer" in err
    login(monkeypatch, "alice")
    code, out, _ = run(capsys, "approve", pid[:10], "--by", "alice", "--db", str(db))
    assert (code, out.split()) == (0, [pid, "approved"])
    code, _, err = run(capsys, "approve", pid, "--by", "bob", "--db", str(db))
    assert code == 1 and "is approved; cannot move it to approved" in err

    code, out, _ = run(capsys, "reject", other[:8], "--by", "alice", "--reason", "not now", "--db", str(db))
    assert (code, out.split()) == (0, [other, "rejected"])

    code, out, _ = run(capsys, "show", pid[:8], "--db", str(db))
    shown = json.loads(out)
    assert (shown["id"], shown["state"], shown["proposer"]) == (pid, "approved", "carol")
    assert shown["proposal"]["changes"][0]["after"] == "0:48,1:32"
    assert shown["proposer_actor"] == "unix:carol"
    assert [(a["who"], a["actor"], a["from_state"], a["to_state"], a["result"]) for a in shown["audit"]] == [
        ("carol", "unix:carol", None, "pending", "ok"),
        ("carol", "unix:carol", "pending", "pending", "refused"),
        ("alice", "unix:alice", "pending", "approved", "ok"),
    ]
    assert shown["steps"] == []

    code, out, _ = run(capsys, "list", "--state", "rejected", "--json", "--db", str(db))
    assert [p["id"] for p in json.loads(out)] == [other]

    code, out, _ = run(capsys, "audit", "--db", str(db))
    assert len(out.splitlines()) == 5
    assert out.splitlines()[-1].endswith("alice [unix:alice]  pending -> rejected  ok  not now")
    code, out, _ = run(capsys, "audit", other[:8], "--json", "--db", str(db))
    assert [a["to_state"] for a in json.loads(out)] == ["pending", "rejected"]


def test_shown_proposal_can_be_resubmitted(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, _ = run(capsys, "submit", str(write(tmp_path, vl_weights_doc(**FUTURE))), "--db", str(db))
    pid = out.strip()
    _, out, _ = run(capsys, "show", pid, "--db", str(db))
    again = write(tmp_path, json.loads(out)["proposal"] | {"id": pid}, "again.json")
    assert run(capsys, "submit", str(again), "--db", str(db))[1].strip() == pid


def test_format_errors_exit_2_listing_every_problem(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, vl_weights_doc(kind="resize", policy="", created_at="soon"))
    code, out, err = run(capsys, "submit", str(bad), "--db", str(db))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"ibpool proposals: {bad}: ") for line in lines)
    assert not db.exists()


def test_submit_from_stdin(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps(vl_weights_doc(**FUTURE))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, _ = run(capsys, "submit", "-", "--db", str(db))
    assert code == 0 and len(out.strip()) == 64


def test_usage_errors(tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "approve", "abc", "--db", str(db))[0] == 2
    assert run(capsys)[0] == 2
    assert run(capsys, "frobnicate")[0] == 2
    assert run(capsys, "--help")[0] == 0
    code, _, err = run(capsys, "list", "--db", str(db))
    assert code == 2 and "no proposal store" in err
    code, _, err = run(capsys, "submit", str(tmp_path / "missing.json"), "--db", str(db))
    assert code == 2 and "cannot read" in err
    run(capsys, "submit", str(write(tmp_path, vl_weights_doc(**FUTURE))), "--db", str(db))
    code, _, err = run(capsys, "approve", "abc", "--by", "policy:auto", "--db", str(db))
    assert code == 2 and "not a person's name" in err
    code, _, err = run(capsys, "submit", str(tmp_path / "p.json"), "--by", "policy:x", "--db", str(db))
    assert code == 2


def test_unknown_and_ambiguous_ids_exit_1(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for index in range(20):
        path = write(tmp_path, vl_weights_doc(policy=f"p{index}", **FUTURE))
        ids.append(run(capsys, "submit", str(path), "--db", str(db))[1].strip())
    code, _, err = run(capsys, "show", "deadbeefdeadbeef", "--db", str(db))
    assert code == 1 and "no proposal" in err
    shared = next(a[0] for a in ids if sum(b.startswith(a[0]) for b in ids) > 1)
    code, _, err = run(capsys, "approve", shared, "--by", "alice", "--db", str(db))
    assert code == 1 and "give more digits" in err


def test_expire(tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write(tmp_path, vl_weights_doc(), "old.json")
    fresh = write(tmp_path, vl_weights_doc(policy="fresh", **FUTURE), "fresh.json")
    old_id = run(capsys, "submit", str(old), "--db", str(db))[1].strip()
    run(capsys, "submit", str(fresh), "--db", str(db))
    code, _, err = run(capsys, "approve", old_id, "--by", "alice", "--db", str(db))
    assert code == 1 and "expired at 2024-05-01T14:00:00Z" in err
    code, out, _ = run(capsys, "expire", "--db", str(db))
    assert (code, out.split()) == (0, [old_id, "expired"])
    assert run(capsys, "expire", "--db", str(db))[1] == ""


def test_approval_config_and_auto_approve(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "approval.yaml"
    config.write_text(
        "name: auto\nauto_approve:\n  move_nodes: {max_nodes: 1}\nlimits:\n  max_pool_share_moved: 0.3\n"
    )
    small = run(capsys, "submit", str(write(tmp_path, move_doc(1, 4) | FUTURE, "s.json")), "--db", str(db))[1]
    big = run(
        capsys, "submit", str(write(tmp_path, move_doc(3, 8, tag="x") | FUTURE, "b.json")), "--db", str(db)
    )[1]
    code, out, _ = run(capsys, "auto-approve", "--config", str(config), "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [small.strip(), "policy:auto", "approved"]
    assert "left pending: moves 3 nodes: more than max_nodes 1" in lines[1]
    code, _, _ = run(capsys, "auto-approve", big.strip(), "--config", str(config), "--db", str(db))
    assert code == 1
    monkeypatch.setenv("IBPOOL_APPROVAL_CONFIG", str(config))
    code, _, err = run(capsys, "approve", big.strip(), "--by", "alice", "--db", str(db))
    assert code == 1 and "max_pool_share_moved 30%" in err
    config.write_text("limits: {max_pool_share_moved: 3}\n")
    code, _, err = run(capsys, "approve", big.strip(), "--by", "alice", "--db", str(db))
    assert code == 2 and f"{config}: limits.max_pool_share_moved" in err
    monkeypatch.delenv("IBPOOL_APPROVAL_CONFIG")
    code, _, err = run(capsys, "auto-approve", "--db", str(db))
    assert code == 2 and "needs an approval policy file with a name" in err


def test_db_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("IBPOOL_DB", raising=False)
    assert db_path(None) == DEFAULT_DB == Path("/var/lib/ibpool/ibpool.db")
    monkeypatch.setenv("IBPOOL_DB", str(tmp_path / "env.db"))
    assert db_path(None) == tmp_path / "env.db"
    assert db_path(tmp_path / "flag.db") == tmp_path / "flag.db"
