"""Starting and stopping real programs: each in its own process group, all stopped in every exit path.

```python
with Processes() as procs:                       # or procs.close() in a finally
    ctld = procs.spawn(["slurmctld", "-D"], log=root / "ctld.out", env=env, cwd=root)
    poll_until(lambda: up(), 30, "slurmctld to answer")
```

On exit each spawned process is stopped, newest first: SIGTERM to its group, wait, SIGKILL if needed. So
what a program forks stops with it, and a terminal's Ctrl-C reaches only Python, which stops them.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

from foundation import commands
from foundation.commands import CommandResult, ProgramNotFoundError, find_program, run_command
from simulator.backends.errors import ProcessError

which = commands.which  # the one program lookup; the harnesses and the demo import it from here


def program(name: str, override: str | None = None, error: type[ProcessError] = ProcessError) -> str:
    """`override` when given (it must be executable), else the installed program; `error` when neither."""
    try:
        return find_program(override if override is not None else name)
    except ProgramNotFoundError as exc:
        raise error(str(exc) if override is None else f"{name}: {exc}") from None


def run_tool(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    check: bool,
    error: type[ProcessError],
) -> CommandResult:
    """Run one client program with the shared runner in `cwd`; `error` when it cannot start or times out,
    and, when `check`, on a non-zero exit."""
    result = run_command(argv, timeout, cwd=cwd, env=env)
    if result.start_error is not None or result.timed_out or (check and not result.ok):
        raise error(result.describe(with_args=True))
    return result


def poll_until(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.05,
    error: type[ProcessError] = ProcessError,
) -> None:
    """Poll until `predicate` holds; `error` naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    return free_ports(1)[0]


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (state first), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()


def is_gone(pid: int) -> bool:
    """True when `pid` has exited (a zombie counts: PID 1 in a container may not reap orphans)."""
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def live_in_groups(groups: Iterable[int]) -> list[int]:
    """Processes (not zombies) whose process group is one of `groups`."""
    wanted = set(groups)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and fields[0] not in ("Z", "X") and int(fields[2]) in wanted:
            found.append(int(entry.name))
    return found


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """True once the process has exited, without reaping it (its pid stays reserved until `wait`)."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped elsewhere
        return True


def _leads_group(proc: subprocess.Popen[bytes]) -> bool:
    try:
        return os.getpgid(proc.pid) == proc.pid != os.getpgrp()
    except ProcessLookupError:
        return False


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> int | None:
    """SIGTERM (and SIGCONT), wait, SIGKILL if needed; reap it. Its exit code (None for no process).

    When the process leads its own group the signals go to the group, and whatever is left of the group
    after the leader exited is killed before the leader is reaped (so the group id cannot be reused yet).
    """
    if proc is None:
        return None
    if proc.returncode is None:
        group = _leads_group(proc)

        def send(signum: int) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group:
                    os.killpg(proc.pid, signum)
                else:
                    os.kill(proc.pid, signum)

        if not _exited(proc):
            send(signal.SIGTERM)
            send(signal.SIGCONT)  # a stopped (SIGSTOP) process acts on SIGTERM only once continued
            deadline = time.monotonic() + timeout
            while not _exited(proc) and time.monotonic() < deadline:
                time.sleep(0.01)
            if not _exited(proc):
                send(signal.SIGKILL)
        if group:
            send(signal.SIGKILL)  # what the leader left behind in its group
            deadline = time.monotonic() + timeout  # a killed process takes a moment to be gone
            while live_in_groups((proc.pid,)) and time.monotonic() < deadline:
                time.sleep(0.01)
        proc.wait(timeout)
    return proc.returncode


def _stop_pid(pid: int, timeout: float) -> None:
    """SIGTERM a process that is not our child (a daemon), wait until it is gone, SIGKILL if needed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while not is_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not is_gone(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class StartStop(ABC):
    """`with thing:` starts it (`start()`) and stops it (`stop()`) whatever happens inside."""

    @abstractmethod
    def start(self) -> None:
        """Bring the thing up."""

    @abstractmethod
    def stop(self) -> None:
        """Bring it down (idempotent)."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class Processes:
    """The programs one context started; `close()` stops all of them, newest first, each whatever happens.

    A failure (or Ctrl-C) while stopping one does not keep the others running: it is raised after all
    were stopped. `close()` is idempotent, and the context can spawn again after it.
    """

    def __init__(self, stop_timeout: float = 10.0) -> None:
        self.stop_timeout = stop_timeout
        self.started: list[tuple[str, int]] = []  # every (name, pid) ever spawned: to check nothing is left
        self._stack = contextlib.ExitStack()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stdin: int = subprocess.DEVNULL,
        name: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in a new session, output (appended) to `log`; it is stopped by `close()`."""
        with log.open("ab") as out:
            proc = subprocess.Popen(
                list(argv),
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        self.started.append((name or Path(argv[0]).name, proc.pid))
        self._stack.callback(stop_process, proc, self.stop_timeout)
        return proc

    def adopt(self, name: str, pid: int) -> None:
        """Stop `pid` (a daemon this context started indirectly, e.g. from its pid file) in `close()`."""
        self.started.append((name, pid))
        self._stack.callback(_stop_pid, pid, self.stop_timeout)

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run `callback` in `close()`, in the same newest-first order as the processes."""
        self._stack.callback(callback)

    @property
    def pids(self) -> list[int]:
        """Every pid this context started (also those already stopped)."""
        return [pid for _, pid in self.started]

    def running(self) -> list[int]:
        """Started pids, and members of their process groups, that are still alive."""
        return sorted(set(live_in_groups(self.pids)) | {pid for pid in self.pids if not is_gone(pid)})

    def close(self) -> None:
        """Stop everything started here, newest first."""
        self._stack.close()

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@contextlib.contextmanager
def signals_raise(signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """While inside: these signals raise SystemExit(128 + signal), so `finally` blocks stop what runs.

    Only in the main thread, and only for signals whose handler is the default (otherwise a no-op).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    saved = {}
    for signum in signums:
        if signal.getsignal(signum) is signal.SIG_DFL:
            saved[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


class WaitTimeoutError(ProcessError, AssertionError):
    """A wait that ran out (an AssertionError too, so a test reports it as a failure)."""


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
    """Poll `predicate` until it holds; AssertionError naming `what` after `timeout` seconds."""
    poll_until(predicate, timeout, what, error=WaitTimeoutError)


def start_http_program(
    argv: list[str],
    port: int,
    ready_path: str = "/metrics",
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    *,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start a program that serves HTTP on `port` and wait until `ready_path` answers at all."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, cwd=cwd
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


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """SIGTERM, wait, SIGKILL if needed (its group when it leads one); returns the exit code."""
    stop_process(proc, timeout)
    if proc.stderr:
        proc.stderr.close()
    return proc.returncode
