"""The diagnostics the adapter runs: argv built from validated numbers, no shell, a timeout on each.

Diagnostics inherit the environment (so IBSIM_SOCKNAME and SIM_HOST pass through), plus `diag.env`
and `LD_PRELOAD=diag.preload` when set (umad2sim under ibsim). They run in a scratch directory, because
umad2sim writes a fake sysfs tree into the working directory (tmpfs when there is one).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler_hooks.errors import CommandFailedError
from scheduler_hooks.opensm.config import DiagConfig

log = logging.getLogger(__name__)

MAX_LID = 0xBFFF
MAX_PORT = 254
SMP_OPS = ("vlarb", "sl2vl", "pkeys")
_SHM = Path("/dev/shm")


@dataclass(frozen=True)
class Output:
    """What a finished command printed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


Runner = Callable[[Sequence[str], float], Output]
"""Runs argv to completion within a timeout; raises CommandFailedError when it cannot start or overruns."""


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
    """The program's path (PATH, then /usr/sbin and /sbin); CommandFailedError when it is not installed."""
    if "/" in name:
        return name
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        raise CommandFailedError(f"{name} is not installed")
    return path


class ProcessRunner:
    """Runs commands as child processes in `cwd` with `env`; kills the process group on timeout."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd

    def __call__(self, argv: Sequence[str], timeout: float) -> Output:
        args = tuple(argv)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                env=self.env,
                cwd=self.cwd,
                timeout=timeout,
                check=False,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise CommandFailedError(f"{Path(args[0]).name}: no answer within {timeout:g} s") from exc
        except OSError as exc:
            raise CommandFailedError(f"{Path(args[0]).name}: cannot start: {exc}") from exc
        return Output(args, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


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
            parent = _SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else None
            cwd = self._own_workdir = Path(tempfile.mkdtemp(prefix="ibpool-opensm-", dir=parent))
        return ProcessRunner(env, cwd)

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
        """Run one diagnostic; its stdout, or CommandFailedError with the end of its stderr."""
        output = self.runner(argv, self.config.command_timeout)
        if output.returncode != 0:
            last = (output.stderr.strip().splitlines() or [""])[-1][:300]
            raise CommandFailedError(
                f"{Path(argv[0]).name} {' '.join(argv[1:])}: exit {output.returncode}: {last}"
            )
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
