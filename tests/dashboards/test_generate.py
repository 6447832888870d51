"""Regenerating the dashboards leaves the tree unchanged; `check` fails on anything stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dashboards.build import JSON_DIR, rendered, stale
from dashboards.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_committed_json_matches_a_regeneration() -> None:
    assert stale(JSON_DIR) == [], "run `python -m dashboards generate` and commit dashboards/json"


def test_rendering_is_deterministic() -> None:
    assert rendered() == rendered()


def test_python_m_dashboards_check_passes_on_the_tree() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dashboards", "check"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_check_fails_on_missing_changed_and_extra_files(tmp_path: Path) -> None:
    assert main(["check", "--dir", str(tmp_path)]) == 1
    assert main(["generate", "--dir", str(tmp_path)]) == 0
    assert main(["check", "--dir", str(tmp_path)]) == 0

    fleet = tmp_path / "ibpool-fleet.json"
    fleet.write_text(fleet.read_text() + " ")
    assert stale(tmp_path) == ["ibpool-fleet.json"]
    assert main(["check", "--dir", str(tmp_path)]) == 1

    assert main(["generate", "--dir", str(tmp_path)]) == 0
    (tmp_path / "old-dashboard.json").write_text("{}")
    assert main(["check", "--dir", str(tmp_path)]) == 1
    assert main(["generate", "--dir", str(tmp_path)]) == 0
    assert not (tmp_path / "old-dashboard.json").exists()
    assert main(["check", "--dir", str(tmp_path)]) == 0


def test_usage_errors_exit_2() -> None:
    assert main([]) == 2
    assert main(["publish"]) == 2
