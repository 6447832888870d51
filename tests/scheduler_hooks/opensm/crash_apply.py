"""Run one apply in a child process that SIGKILLs itself right after a given step (crash tests).

Usage: python -m tests.scheduler_hooks.opensm.crash_apply CONFIG_JSON CHANGES_JSON STEP [NTH]
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from scheduler_hooks.opensm import Change, OpenSMAdapter, OpenSMConfig


def main(argv: list[str]) -> int:
    """Apply the changes; die with SIGKILL after the NTH (default 1st) report of STEP."""
    config = OpenSMConfig.from_mapping(json.loads(Path(argv[0]).read_text()))
    changes = [Change(**c) for c in json.loads(Path(argv[1]).read_text())]
    step, nth = argv[2], int(argv[3]) if len(argv) > 3 else 1
    seen = 0

    def on_step(name: str, detail: Mapping[str, object]) -> None:
        nonlocal seen
        if name == step:
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    OpenSMAdapter(config, on_step=on_step).apply(changes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
