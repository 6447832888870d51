"""The one command runner and program lookup: no shell, stdin closed, environment passed on, timeouts
kill the whole process group, output decoded with replacement, a bounded one-line account."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from foundation.commands import (
    MAX_ERROR_CHARS,
    CommandResult,
    CommandRunner,
    ProgramNotFoundError,
    find_program,
    run_command,
    scratch_parent,
    which,
)

PY = sys.executable


def test_output_exit_status_and_cwd(tmp_path: Path) -> None:
    result = CommandRunner(10, cwd=tmp_path).run(
        [PY, "-c", "import os, sys; print(os.getcwd()); print('oops', file=sys.stderr); sys.exit(3)"]
    )
    assert result.stdout.strip() == str(tmp_path)
    assert result.returncode == 3 and not result.ok
    assert result.describe() == f"{Path(PY).name}: exit 3: oops"


def test_environment_is_inherited_or_given() -> None:
    code = "import os; print(os.environ.get('IBSIM_SOCKNAME', '-'))"
    os.environ["IBSIM_SOCKNAME"] = "inherited-test"
    try:
        assert CommandRunner(10).run([PY, "-c", code]).stdout.strip() == "inherited-test"
    finally:
        del os.environ["IBSIM_SOCKNAME"]
    given = CommandRunner(10, env={"IBSIM_SOCKNAME": "given", "PATH": "/usr/bin"})
    assert given.run([PY, "-c", code]).stdout.strip() == "given"


def test_no_shell_is_involved() -> None:
    result = CommandRunner(10).run([PY, "-c", "import sys; print(sys.argv[1])", "$HOME; echo hi"])
    assert result.ok and result.stdout.strip() == "$HOME; echo hi"


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time;"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid));"
        "print('partial', flush=True); time.sleep(60)"
    )
    started = time.monotonic()
    result = CommandRunner(1.0).run([PY, "-c", script])
    assert time.monotonic() - started < 30
    assert result.timed_out and not result.ok
    assert result.stdout.strip() == "partial"
    assert result.describe() == f"{Path(PY).name}: no answer within 1 s (killed)"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (already killed, not yet reaped by init) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_missing_program_is_a_result_not_an_exception() -> None:
    result = CommandRunner(10).run(["/nonexistent/perfquery", "-l", "1", "255"])
    assert not result.ok and result.start_error
    assert result.describe() == "perfquery: cannot start: No such file or directory"


def test_scratch_parent_prefers_the_given_directory_then_tmpfs(tmp_path: Path) -> None:
    assert scratch_parent(tmp_path) == tmp_path
    default = scratch_parent()
    assert default.is_dir() and os.access(default, os.W_OK)
    if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        assert default == Path("/dev/shm")


def test_stdin_is_closed_and_bad_bytes_are_replaced() -> None:
    code = "import sys; data = sys.stdin.read(); sys.stdout.buffer.write(b'read %d \\xff' % len(data))"
    result = run_command([PY, "-c", code], 10)
    assert result.ok and result.stdout == "read 0 \ufffd"


def test_the_error_text_is_the_last_line_and_bounded() -> None:
    code = (
        "import sys; print('first', file=sys.stderr); print('x' * 5000, 'last', file=sys.stderr); sys.exit(2)"
    )
    result = run_command([PY, "-c", code, "an argument"], 10)
    assert result.error_text == "x" * MAX_ERROR_CHARS
    assert result.describe(with_args=True).startswith(f"{Path(PY).name} -c import sys;")
    assert len(result.describe(with_args=True)) < 2 * MAX_ERROR_CHARS + 20
    quiet = CommandResult(("/usr/sbin/smpquery", "vlarb", "1", "1"), 1, "ibwarn: on stdout\n", "", 0.1)
    assert quiet.describe(with_args=True) == "smpquery vlarb 1 1: exit 1: ibwarn: on stdout"


def test_programs_are_found_in_bin_dir_on_path_or_in_sbin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    assert which("tool", tmp_path) == find_program("tool", tmp_path) == str(tool)
    assert which(str(tool)) == str(tool)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_program("tool") == str(tool)
    monkeypatch.setenv("PATH", "")
    sbin = which("ldconfig")  # in /sbin or /usr/sbin on every Debian system, never on an empty PATH
    assert sbin is not None and Path(sbin).parent.name == "sbin"
    with pytest.raises(ProgramNotFoundError, match="tool is not installed"):
        find_program("tool")
    tool.chmod(0o644)
    with pytest.raises(ProgramNotFoundError, match=f"{tool} is not an executable file"):
        find_program("tool", tmp_path)
    with pytest.raises(ProgramNotFoundError, match="is not an executable file"):
        find_program(str(tmp_path))  # a directory
