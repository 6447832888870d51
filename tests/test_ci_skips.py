"""tests/ci_skips.py against a real pytest run: with IBPOOL_FAIL_ON_SKIP a skip fails, unless allowed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SAMPLE = """
import pytest

def test_passes():
    pass

@pytest.mark.skipif(True, reason="not installed: slurmctld")
def test_needs_a_program():
    pass

def test_skips_at_run_time():
    pytest.skip("real sysfs captures not present")

def test_legitimate_skip():
    pytest.skip("SIGTERM has a handler in this test process")

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False
"""
MODULE_SKIP = 'import pytest\npytest.skip("victoria-metrics is not installed", allow_module_level=True)\n'


def run_pytest(directory: Path, fail_on_skip: bool) -> tuple[int, dict[str, int], str]:
    """Exit status, the summary counts and the output of `pytest` over `directory` with the plugin loaded."""
    env = {k: v for k, v in os.environ.items() if k != "IBPOOL_FAIL_ON_SKIP"}
    env["PYTHONPATH"] = str(REPO)
    if fail_on_skip:
        env["IBPOOL_FAIL_ON_SKIP"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-p", "no:cacheprovider", "-q", "-rA",
         "--rootdir", str(directory), "-c", os.devnull, str(directory)],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    summary = proc.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    return proc.returncode, counts, proc.stdout


def _sample(tmp_path: Path) -> Path:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    return tmp_path


def test_without_the_variable_skips_stay_skips(tmp_path: Path) -> None:
    code, counts, _ = run_pytest(_sample(tmp_path), fail_on_skip=False)
    assert code == 0
    assert counts == {"passed": 1, "skipped": 4, "xfailed": 1}


def test_in_ci_a_skip_fails_unless_it_is_on_the_allow_list(tmp_path: Path) -> None:
    code, counts, output = run_pytest(_sample(tmp_path), fail_on_skip=True)
    assert code == 1
    # a skipif mark skips in setup (now an error), pytest.skip() in the call (now a failure); the allowed
    # skip and the skipped module stay skips, and the module fails the run
    assert counts == {"failed": 1, "error": 1, "passed": 1, "skipped": 2, "xfailed": 1}
    assert output.count("skipped in CI (IBPOOL_FAIL_ON_SKIP=1)") >= 3
    assert "test_module_skip.py: skipped in CI" in output


def test_in_ci_a_module_skipped_at_collection_alone_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    assert run_pytest(tmp_path, fail_on_skip=False)[:2] == (0, {"passed": 1, "skipped": 1})
    code, counts, output = run_pytest(tmp_path, fail_on_skip=True)
    assert (code, counts) == (1, {"passed": 1, "skipped": 1})
    assert "victoria-metrics is not installed" in output
