"""`ibpool apply` through main(argv), with fake sides behind the config's sections."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from proposals.cli import main as proposals_main
from proposals.store import Store
from scheduler_hooks.apply import cli
from scheduler_hooks.apply.config import ApplyConfig
from scheduler_hooks.apply.sides import Side
from tests.proposals.factory import logged_in
from tests.scheduler_hooks.apply.fakes import MOVE_OSM, MOVE_SLURM, FakeSide, doc, live_before

MOVE = MOVE_SLURM + MOVE_OSM
LATER = {"expires_at": "2099-01-01T00:00:00Z"}


@pytest.fixture
def live() -> dict[str, str]:
    return live_before(MOVE)


@pytest.fixture
def sides(live: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeSide]:
    made = {"opensm": FakeSide("opensm", live), "slurm": FakeSide("slurm", live)}

    @contextlib.contextmanager
    def fake_sides(config: ApplyConfig) -> Iterator[list[Side]]:
        yield [made[name] for name in config.sections]

    monkeypatch.setattr(cli, "_sides", fake_sides)
    return made


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "apply.yaml"
    path.write_text(
        f"state_dir: {tmp_path / 'state'}\n"
        "opensm: {config_file: /o/opensm.conf, qos_policy_file: /o/qos, partitions_file: /o/p, pid: 7}\n"
        "slurm: {slurm_conf: /etc/slurm/slurm.conf}\n"
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def submitted(tmp_path: Path, capsys: pytest.CaptureFixture[str], approve: bool = True) -> str:
    path = tmp_path / "move.json"
    path.write_text(json.dumps(doc(MOVE, "move_nodes") | LATER))
    db = str(tmp_path / "ibpool.db")
    with logged_in("alice"):
        assert proposals_main(["--db", db, "submit", str(path), "--by", "alice"]) == 0
    pid = capsys.readouterr().out.strip()
    if approve:
        with logged_in("bob"):
            assert proposals_main(["--db", db, "approve", pid, "--by", "bob"]) == 0
        capsys.readouterr()
    return pid


def test_dry_run_then_apply_then_apply_again(
    tmp_path: Path,
    config: Path,
    sides: dict[str, FakeSide],
    live: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    pid = submitted(tmp_path, capsys)
    db = str(tmp_path / "ibpool.db")
    code, out, _ = run(capsys, pid[:10], "--config", str(config), "--db", db)
    assert code == 0 and out.startswith(f"DRY RUN (nothing changed; add --yes to apply): proposal {pid}")
    assert "    slurm.partition.a.nodes [slurm] live matches before" in out
    assert "  slurm would:\n    - set slurm.partition.a.nodes to n1" in out
    with Store(db) as store:
        assert store.get(pid).state == "approved" and store.steps(pid) == []
    assert not (tmp_path / "state").exists()

    code, out, _ = run(capsys, pid, "--yes", "--config", str(config), "--db", db, "--by", "carol")
    assert code == 0 and out.startswith(
        f"{pid}  applied: applied and verified (slurm applied, opensm applied)"
    )
    assert all(live[t] == a for t, _, a in MOVE)
    code, out, _ = run(capsys, pid, "--yes", "--config", str(config), "--db", db, "--json")
    data = json.loads(out)
    assert code == 0 and data["outcome"]["result"] == "already_applied" and data["recovered"] == []
    with Store(db) as store:
        assert [e.who for e in store.audit(pid)][-2:] == ["carol", "carol"]


def test_refusals_exit_1(
    tmp_path: Path, config: Path, sides: dict[str, FakeSide], capsys: pytest.CaptureFixture[str]
) -> None:
    pid = submitted(tmp_path, capsys, approve=False)
    db = str(tmp_path / "ibpool.db")
    code, _, err = run(capsys, pid, "--yes", "--config", str(config), "--db", db)
    assert code == 1 and "refused: it is pending; only an approved proposal is applied" in err
    code, out, _ = run(capsys, pid, "--config", str(config), "--db", db, "--json")
    assert code == 1 and json.loads(out)["refusals"] == [
        "it is pending; only an approved proposal is applied"
    ]
    code, _, err = run(capsys, "abcdef", "--yes", "--config", str(config), "--db", db)
    assert code == 1 and "no proposal with id abcdef" in err


def test_failures_exit_3_when_rolled_back_and_4_when_not(
    tmp_path: Path, config: Path, sides: dict[str, FakeSide], capsys: pytest.CaptureFixture[str]
) -> None:
    pid = submitted(tmp_path, capsys)
    db = str(tmp_path / "ibpool.db")
    sides["opensm"].fail_at = 1
    code, _, err = run(capsys, pid, "--yes", "--config", str(config), "--db", db)
    assert code == 3 and f"{pid}  rolled_back: failed and rolled back: opensm: set" in err
    assert f"audit trail: ibpool proposals show {pid[:12]}" in err

    other = tmp_path / "other"
    other.mkdir()
    (other / "apply.yaml").write_text(config.read_text())
    pid = submitted(other, capsys)
    sides["slurm"].fail_rollback = True
    for side in sides.values():
        side.live.update({t: b for t, b, _ in MOVE})
    code, _, err = run(capsys, pid, "--yes", "--config", str(config), "--db", str(other / "ibpool.db"))
    assert code == 4 and "rollback failed" in err


def test_config_problems_exit_2_with_file_and_key(
    tmp_path: Path, sides: dict[str, FakeSide], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("state_dir: x\nslurm: {persist: 1}\n")
    code, _, err = run(capsys, "abc", "--config", str(bad), "--db", str(tmp_path / "db"))
    assert code == 2
    assert err.splitlines() == [
        f"ibpool apply: {bad}: state_dir: must be an absolute path, got 'x'",
        f"ibpool apply: {bad}: slurm.slurm_conf: missing",
        f"ibpool apply: {bad}: slurm.persist: must be true or false, got 1",
    ]


def test_a_proposal_needing_an_unconfigured_side_is_a_config_error(
    tmp_path: Path, sides: dict[str, FakeSide], capsys: pytest.CaptureFixture[str]
) -> None:
    pid = submitted(tmp_path, capsys)
    only = tmp_path / "slurm-only.yaml"
    only.write_text(f"state_dir: {tmp_path / 'state'}\nslurm: {{slurm_conf: /etc/slurm/slurm.conf}}\n")
    code, _, err = run(capsys, pid, "--yes", "--config", str(only), "--db", str(tmp_path / "ibpool.db"))
    assert code == 2 and f"{only}: opensm: not configured, but no configured side handles opensm." in err


def test_usage(tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--config", str(config))[0] == 2
    code, _, err = run(capsys, "abc", "--config", str(config), "--db", str(tmp_path / "missing.db"))
    assert code == 2 and "no proposal store" in err and not (tmp_path / "missing.db").exists()
    assert run(capsys, "abc", "--by", "policy:x", "--config", str(config))[0] == 2
    assert run(capsys, "--help")[0] == 0


def test_recover_with_nothing_to_do(
    tmp_path: Path, config: Path, sides: dict[str, FakeSide], capsys: pytest.CaptureFixture[str]
) -> None:
    submitted(tmp_path, capsys)
    code, out, _ = run(capsys, "--recover", "--config", str(config), "--db", str(tmp_path / "ibpool.db"))
    assert (code, out) == (0, "nothing to recover\n")
