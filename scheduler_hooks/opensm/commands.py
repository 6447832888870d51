"""The diagnostics the adapter runs: argv built from validated numbers, no shell, a timeout on each.

Diagnostics inherit the environment (so IBSIM_SOCKNAME and SIM_HOST pass through), plus `diag.env`
and `LD_PRELOAD=diag.preload` when set (umad2sim under ibsim). They run in a scratch directory, because
umad2sim writes a fake sysfs tree into the working directory (tmpfs when there is one).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from foundation.commands import (
    CommandResult,
    CommandRunner,
    ProgramNotFoundError,
    find_program,
    scratch_parent,
)
from scheduler_hooks.errors import CommandFailedError
from scheduler_hooks.opensm.config import DiagConfig

MAX_LID = 0xBFFF
MAX_PORT = 254
SMP_OPS = ("vlarb", "sl2vl", "pkeys")

Output = CommandResult
"""What a finished command printed (the shared runner's result)."""

Runner = Callable[[Sequence[str]], Output]
"""Runs argv (within the configured timeout) and says how it ended; it does not raise for the command's
failures. The default is the shared runner's `CommandRunner.run`."""


def check_lid(lid: int) -> int:
    """A unicast LID (1-0xBFFF), else ValueError."""
    if isinstance(lid, bool) or not isinstance(lid, int) or not 1 <= lid <= MAX_LID:
        raise ValueError(f"LID {lid!r} is not a unicast LID")
    return lid


def check_port(port: int) -> int:
    """A port number 0-254, else ValueError."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise ValueError(f"port {port!r} is not 0-{MAX_PORT}")
    return port


def program(name: str) -> str:
    """The program's path (a configured path, else PATH, /usr/sbin, /sbin); CommandFailedError if absent."""
    try:
        return find_program(name)
    except ProgramNotFoundError as exc:
        raise CommandFailedError(str(exc)) from None


class Diag:
    """smpquery / saquery / ibnetdiscover with the configured device, timeouts and environment."""

    def __init__(self, config: DiagConfig, runner: Runner | None = None) -> None:
        self.config = config
        self._own_workdir: Path | None = None
        self.runner = runner or self._default_runner()

    def _default_runner(self) -> Runner:
        env = {**os.environ, **self.config.env}
        if self.config.preload is not None:
            env["LD_PRELOAD"] = str(self.config.preload)
        cwd = self.config.workdir
        if cwd is None:
            cwd = self._own_workdir = Path(tempfile.mkdtemp(prefix="ibpool-opensm-", dir=scratch_parent()))
        return CommandRunner(self.config.command_timeout, cwd=cwd, env=env).run

    def close(self) -> None:
        """Remove the scratch directory this object made."""
        if self._own_workdir is not None:
            shutil.rmtree(self._own_workdir, ignore_errors=True)
            self._own_workdir = None

    def _common(self) -> list[str]:
        args: list[str] = []
        if self.config.ca is not None:
            args += ["-C", self.config.ca]
        if self.config.ca_port is not None:
            args += ["-P", str(check_port(self.config.ca_port))]
        if self.config.mad_timeout_ms is not None:
            args += ["-t", str(self.config.mad_timeout_ms)]
        return args

    def run(self, argv: list[str]) -> str:
        """Run one diagnostic; its stdout, or CommandFailedError (cannot start, timeout, or exit and the end
        of its stderr)."""
        output = self.runner(argv)
        if not output.ok:
            raise CommandFailedError(output.describe(with_args=True))
        return output.stdout

    def smpquery(self, op: str, lid: int, port: int) -> str:
        """`smpquery OP LID PORT` (OP one of vlarb, sl2vl, pkeys)."""
        if op not in SMP_OPS:
            raise ValueError(f"smpquery operation {op!r} is not one of {SMP_OPS}")
        argv = [
            program(self.config.smpquery),
            *self._common(),
            op,
            str(check_lid(lid)),
            str(check_port(port)),
        ]
        return self.run(argv)

    def path_records(self, slid: int, dlid: int) -> str:
        """`saquery -p --src-to-dst SLID:DLID`."""
        pair = f"{check_lid(slid)}:{check_lid(dlid)}"
        return self.run([program(self.config.saquery), *self._common(), "-p", "--src-to-dst", pair])

    def ports_report(self) -> str:
        """`ibnetdiscover -p` (one line per port)."""
        return self.run([program(self.config.ibnetdiscover), *self._common(), "-p"])
