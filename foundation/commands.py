"""The one way ibpool runs a program and finds it: no shell, stdin closed, a timeout that kills the
program's whole process group, output decoded with replacement, and a one-line account of a failure.

`CommandRunner.run` never raises for the program's own failures (cannot start, timeout, non-zero exit):
it returns a `CommandResult`, and each package turns `not result.ok` into its own error with
`describe()`. The environment is passed on unchanged (that is how umad2sim's preload, IBSIM_SOCKNAME and
SLURM_CONF reach the programs) unless an explicit `env` is given.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from foundation.errors import IbpoolError

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 300
SBIN = "/usr/sbin:/sbin"
_DRAIN_SECONDS = 5.0
_SHM = Path("/dev/shm")


class ProgramNotFoundError(IbpoolError):
    """A program is not installed, or a configured path is not an executable file."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def which(name: str, bin_dir: Path | None = None) -> str | None:
    """The executable file `name` stands for, or None: `bin_dir/name` when `bin_dir` is given, `name`
    itself when it holds a '/', else the first on PATH, then in /usr/sbin and /sbin."""
    if bin_dir is not None or "/" in name:
        path = bin_dir / name if bin_dir is not None else Path(name)
        return str(path) if _executable(path) else None
    search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SBIN) if p)
    return shutil.which(name, path=search)


def find_program(name: str, bin_dir: Path | None = None) -> str:
    """`which(name, bin_dir)`, or ProgramNotFoundError saying what is missing."""
    found = which(name, bin_dir)
    if found is not None:
        return found
    if bin_dir is not None or "/" in name:
        path = bin_dir / name if bin_dir is not None else Path(name)
        raise ProgramNotFoundError(f"{path} is not an executable file")
    raise ProgramNotFoundError(f"{name} is not installed (not on PATH, nor in {SBIN})")


def scratch_parent(preferred: Path | None = None) -> Path:
    """Where a scratch directory for diagnostics goes: `preferred`, else /dev/shm, else TMPDIR.

    Under ibsim, umad2sim writes a fake sysfs tree (`./sys-PID`, ~50 files) for every diagnostic into its
    working directory and deletes it at exit; on a disk mounted with `discard` that costs ~80 ms a
    process, on tmpfs almost nothing. On real hardware the directory stays empty.
    """
    if preferred is not None:
        return preferred
    if _SHM.is_dir() and os.access(_SHM, os.W_OK | os.X_OK):
        return _SHM
    return Path(tempfile.gettempdir())


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended (`timeout_seconds`: the limit it ran under)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    start_error: str | None = None
    timeout_seconds: float | None = None

    @property
    def ok(self) -> bool:
        """True when the command started, finished in time and exited 0."""
        return self.returncode == 0 and not self.timed_out and self.start_error is None

    @property
    def error_text(self) -> str:
        """The last line of stderr (else of stdout), at most MAX_ERROR_CHARS characters."""
        return (_last_line(self.stderr) or _last_line(self.stdout))[:MAX_ERROR_CHARS]

    def describe(self, with_args: bool = False) -> str:
        """One line for logs, health and errors: the program (and its arguments) and why it failed."""
        name = Path(self.argv[0]).name if self.argv else "?"
        shown = " ".join([name, *self.argv[1:]])[:MAX_ERROR_CHARS] if with_args else name
        if self.start_error is not None:
            return f"{shown}: cannot start: {self.start_error}"
        if self.timed_out:
            limit = self.timeout_seconds if self.timeout_seconds is not None else self.seconds
            return f"{shown}: no answer within {limit:g} s (killed)"
        if self.returncode != 0:
            return f"{shown}: exit {self.returncode}: {self.error_text}"
        return f"{shown}: ok"


class CommandRunner:
    """Runs argv lists in `cwd` with `env` (None: this process's), each within `timeout_seconds`."""

    def __init__(
        self,
        timeout_seconds: float,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self._cwd = cwd
        self._env = dict(env) if env is not None else None

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run `argv` to completion or to the timeout; never raises for the command's own failures."""
        args = tuple(argv)
        limit = self.timeout_seconds
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
            error = exc.strerror or str(exc)
            seconds = time.perf_counter() - start
            return CommandResult(args, None, "", "", seconds, start_error=error, timeout_seconds=limit)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            try:  # what it printed before it was killed
                out, err = proc.communicate(timeout=_DRAIN_SECONDS)
            except subprocess.TimeoutExpired:  # a grandchild outside the group still holds the pipes
                proc.kill()
                proc.wait()
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
                out, err = b"", b""
        result = CommandResult(
            args,
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.perf_counter() - start,
            timed_out,
            timeout_seconds=limit,
        )
        log.debug("%s (%.3f s)", result.describe(with_args=True), result.seconds)
        return result


def run_command(
    argv: Sequence[str],
    timeout_seconds: float,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """One command with the runner's rules (for callers that run a single command now and then)."""
    return CommandRunner(timeout_seconds, cwd, env).run(argv)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group the command leads (it was started in a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
