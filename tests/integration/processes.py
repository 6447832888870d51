"""Starting and stopping real programs in integration tests.

The generic parts (free ports, stopping a process and its group) are the product's
`simulator.backends.processes`; this adds HTTP readiness and the ibpool argv for tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

from simulator.backends.processes import free_port, http_get, start_http_program, stop, wait_until

__all__ = ["REPO", "free_port", "http_get", "ibpool_argv", "start_http_program", "stop", "wait_until"]

REPO = Path(__file__).resolve().parents[2]


def ibpool_argv(*args: str) -> list[str]:
    """argv running the ibpool CLI with this interpreter."""
    return [sys.executable, "-m", "ibpool", *args]
