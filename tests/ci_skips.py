"""In CI, a skipped test fails: CI installs every program and fixture the tests need.

`.ci/run` sets `IBPOOL_FAIL_ON_SKIP=1`. A skip whose reason matches `ALLOWED` still passes as a skip (each
entry says why that skip is legitimate on a machine that has everything); any other skip, from a test
turns into a failure that repeats the skip's reason; a module skipped at collection is listed at the end
and fails the run. Without the variable this
plugin changes nothing, so a developer without Slurm or Chromium still gets skips.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from typing import Any

import pytest

ENV = "IBPOOL_FAIL_ON_SKIP"

# reason pattern -> why that skip is legitimate even where CI has installed everything
ALLOWED: dict[str, str] = {
    r"^SIGTERM has a handler in this test process$": "depends on how pytest was started, not on the machine",
}


def enabled() -> bool:
    """True when skips must fail (`IBPOOL_FAIL_ON_SKIP` set to anything but empty or 0)."""
    return os.environ.get(ENV, "") not in ("", "0")


def skip_reason(longrepr: Any) -> str:
    """The reason of a skip report (pytest stores (path, line, 'Skipped: reason'))."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def allowed(reason: str) -> bool:
    """True when `reason` is on the allow-list."""
    return any(re.search(pattern, reason) for pattern in ALLOWED)


def _refusal(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    """The failure text for a skip that is not allowed, else None."""
    reason = skip_reason(report.longrepr)
    if not report.skipped or allowed(reason):
        return None
    return f"skipped in CI ({ENV}=1), where every program and fixture is installed: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A test's skip becomes a failure unless allowed."""
    outcome = yield
    if enabled():
        report: pytest.TestReport = outcome.get_result()
        refusal = None if hasattr(report, "wasxfail") else _refusal(report)
        if refusal is not None:
            report.outcome = "failed"
            report.longrepr = refusal


_MODULES: list[str] = []  # modules skipped at collection that fail this run (one run per process)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module skipped at collection is remembered (turning it into an error would stop the run)."""
    refusal = _refusal(report) if enabled() else None
    if refusal is not None:
        _MODULES.append(f"{report.nodeid}: {refusal}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the modules skipped at collection that fail the run."""
    if _MODULES:
        terminalreporter.section("skipped modules (fail in CI)")
        for line in _MODULES:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run with a module skipped at collection fails."""
    if _MODULES and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
