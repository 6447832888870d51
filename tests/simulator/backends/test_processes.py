"""Processes: every program stopped with its process group, newest first, whatever else fails."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from simulator.backends.processes import Processes, is_gone, signals_raise, stop_process
from tests.helpers import wait_for


def _spawn_shell(procs: Processes, tmp_path: Path, script: str) -> subprocess.Popen[bytes]:
    return procs.spawn(["/bin/sh", "-c", script], log=tmp_path / "out.log", name="sh")


def test_close_stops_each_program_and_what_it_forked(tmp_path: Path) -> None:
    procs = Processes()
    first = _spawn_shell(procs, tmp_path, "sleep 60 & sleep 60")
    second = _spawn_shell(procs, tmp_path, "sleep 60 & sleep 60")
    # Two shells and the background child of each (each shell leads its group); the shell may exec its
    # last command, so a group holds 2 processes once its first `sleep` forked.
    assert wait_for(lambda: len(procs.running()) >= 4), procs.running()
    procs.close()
    assert procs.running() == []
    assert first.returncode is not None and second.returncode is not None
    assert procs.pids == [first.pid, second.pid]


def test_a_program_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    with Processes(stop_timeout=0.3) as procs:
        proc = _spawn_shell(procs, tmp_path, "trap '' TERM; sleep 60 & wait")
        # The child exists once the shell is past its `trap` line: from then on it ignores SIGTERM.
        assert wait_for(lambda: len(procs.running()) >= 2), procs.running()
    assert proc.returncode == -signal.SIGKILL
    assert procs.running() == []


def test_a_stopped_program_is_stopped_too(tmp_path: Path) -> None:
    procs = Processes()
    proc = _spawn_shell(procs, tmp_path, "sleep 60")
    os.killpg(proc.pid, signal.SIGSTOP)
    procs.close()
    assert proc.returncode is not None and procs.running() == []


def test_a_failure_while_stopping_does_not_leave_the_others_running(tmp_path: Path) -> None:
    procs = Processes()
    older = _spawn_shell(procs, tmp_path, "sleep 60")

    def fail() -> None:
        raise KeyboardInterrupt

    procs.on_close(fail)
    newer = _spawn_shell(procs, tmp_path, "sleep 60")
    with pytest.raises(KeyboardInterrupt):
        procs.close()
    assert older.returncode is not None and newer.returncode is not None
    assert procs.running() == []


def test_adopted_daemons_are_stopped(tmp_path: Path) -> None:
    daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        with Processes() as procs:
            procs.adopt("sleep", daemon.pid)
        daemon.wait(5)
        assert is_gone(daemon.pid)
    finally:
        stop_process(daemon)


def test_stop_process_leaves_a_process_that_shares_our_group_alone_but_stops_it() -> None:
    proc = subprocess.Popen(["sleep", "60"])  # our own process group: only the process is signalled
    assert stop_process(proc, 5) == -signal.SIGTERM
    assert stop_process(None) is None


def test_signals_raise_turns_sigterm_into_system_exit() -> None:
    inherited = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # CI may start us with SIGTERM ignored
    try:
        with pytest.raises(SystemExit) as exit_info, signals_raise():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        assert exit_info.value.code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        # A handler someone else installed is left alone.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with signals_raise():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, inherited)
