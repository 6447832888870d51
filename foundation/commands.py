"""Runs one diagnostic without a shell, with a timeout; kills its process group when it overruns.

The exporter's environment is passed on unchanged (that is how the umad2sim preload and IBSIM_SOCKNAME
reach the diagnostics), unless a test hands an explicit `env`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_DRAIN_SECONDS = 5.0
_SHM = Path("/dev/shm")


def scratch_parent(preferred: Path | None = None) -> Path:
    """Where the scratch directory the diagnostics run in goes: `preferred`, else /dev/shm, else TMPDIR.

    Under ibsim, umad2sim writes a fake sysfs tree (`./sys-PID`, ~50 files) for every diagnostic into its
    working directory and deletes it at exit; on a disk mounted with `discard` that costs ~80 ms a
    process, on tmpfs almost nothing. On real hardware the directory stays empty.
    """
    if preferred is not None:
        return preferred
    if _SHM.is_dir() and os.access(_SHM, os.W_OK | os.X_OK):
        return _SHM
    return Path(tempfile.gettempdir())


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    start_error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the command started, finished in time and exited 0."""
        return self.returncode == 0 and not self.timed_out and self.start_error is None

    def describe(self) -> str:
        """One line for logs and health: the program and why it failed (or `ok`)."""
        name = Path(self.argv[0]).name if self.argv else "?"
        if self.start_error is not None:
            return f"{name}: cannot start: {self.start_error}"
        if self.timed_out:
            return f"{name}: no answer within {self.seconds:.1f} s (killed)"
        if self.returncode != 0:
            last = self.stderr.strip().splitlines()[-1:] or [""]
            return f"{name}: exit {self.returncode}: {last[0][:200]}"
        return f"{name}: ok"


class CommandRunner:
    """Runs argv lists with a per-command timeout in `cwd` (a scratch directory umad2sim may write to)."""

    def __init__(
        self,
        timeout_seconds: float,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self._cwd = cwd
        self._env = dict(env) if env is not None else None

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run `argv` to completion or to the timeout; never raises for the command's own failures."""
        args = tuple(argv)
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._cwd,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(args, None, "", "", time.perf_counter() - start, start_error=str(exc))
        timed_out = False
        try:
            out, err = proc.communicate(timeout=self.timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill(proc)
            try:
                out, err = proc.communicate(timeout=_DRAIN_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = b"", b""
        seconds = time.perf_counter() - start
        result = CommandResult(
            args,
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            seconds,
            timed_out,
        )
        if not result.ok:
            log.debug("%s", result.describe())
        return result

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the process group the command leads (it was started in a session of its own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
