"""Starting and stopping real programs in integration tests.

The generic parts (free ports, stopping a process and its group) are the product's
`simulator.backends.processes`; this adds HTTP readiness and the ibpool argv for tests.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from simulator.backends.processes import free_port, stop_process
from tests.helpers import wait_for

__all__ = ["REPO", "free_port", "http_get", "ibpool_argv", "start_http_program", "stop", "wait_until"]

REPO = Path(__file__).resolve().parents[2]


def http_get(port: int, path: str, timeout: float = 10.0, method: str = "GET") -> tuple[int, bytes]:
    """One request on a fresh connection: (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll `predicate` until it holds; fail the test with `what` after `timeout` seconds."""
    if not wait_for(predicate, timeout, interval=0.05):
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def start_http_program(
    argv: list[str],
    port: int,
    ready_path: str = "/metrics",
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> subprocess.Popen[bytes]:
    """Start a program that serves HTTP on `port` and wait until `ready_path` answers at all."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, cwd=REPO
    )

    def answers() -> bool:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"{argv[:3]} exited with {proc.returncode}: {err[-3000:]}")
        try:
            http_get(port, ready_path, timeout=2)
        except OSError:
            return False
        return True

    try:
        wait_until(answers, timeout, f"{argv[0]} to answer on port {port}")
    except BaseException:
        stop(proc)
        raise
    return proc


def ibpool_argv(*args: str) -> list[str]:
    """argv running the ibpool CLI with this interpreter."""
    return [sys.executable, "-m", "ibpool", *args]


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """SIGTERM, wait, SIGKILL if needed (its group when it leads one); returns the exit code."""
    stop_process(proc, timeout)
    if proc.stderr:
        proc.stderr.close()
    return proc.returncode
