"""Run `ibpool apply` and SIGKILL the process right after the NTH record of step STEP (crash tests).

Usage: python -m tests.scheduler_hooks.apply.crash_cli STEP NTH APPLY_ARGV...
"""

from __future__ import annotations

import os
import signal
import sys

from proposals.store import Store
from scheduler_hooks.apply import cli


def main(argv: list[str]) -> int:
    """Patch Store.record_step to die after the chosen record, then run the real CLI."""
    step, nth, rest = argv[0], int(argv[1]), argv[2:]
    original = Store.record_step
    seen = 0

    def record_step(self: Store, proposal_id: str, name: str, detail: str = "") -> int:
        nonlocal seen
        seq = original(self, proposal_id, name, detail)
        if name == step:
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return seq

    setattr(Store, "record_step", record_step)  # noqa: B010 (patched for this process only)
    return cli.main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
