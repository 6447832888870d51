"""Running the Slurm clients: no shell, SLURM_CONF passed, timeouts kill, failures are CommandError."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from exporter.scheduler.commands import SlurmCommands, resolve_program
from exporter.scheduler.errors import CommandError, SlurmReportedError
from exporter.scheduler.reader import SlurmReader
from tests.exporter.scheduler.fake_slurm import FakeSlurm, read
from tests.helpers import wait_for


@pytest.fixture
def fake(tmp_path: Path) -> FakeSlurm:
    return FakeSlurm(tmp_path)


def test_the_commands_print_what_slurm_printed(fake: FakeSlurm) -> None:
    commands = SlurmCommands.resolve(fake.bin_dir, fake.conf, 10)
    assert commands.env["SLURM_CONF"] == str(fake.conf)
    assert commands.nodes_json() == read("gres", "sinfo.json")
    assert commands.jobs_json() == read("gres", "squeue.json")
    assert commands.partitions_text() == read("gres", "partitions.txt")


def test_arguments_are_passed_verbatim_without_a_shell(fake: FakeSlurm) -> None:
    fake.write_program("sinfo", f'printf "%s\\n" "$@" > {fake.data_dir}/argv\n')
    SlurmCommands.resolve(fake.bin_dir, fake.conf, 10).nodes_json()
    assert (fake.data_dir / "argv").read_text() == "--json\n"
    fake.write_program("squeue", f'printf "%s\\n" "$@" > {fake.data_dir}/argv\n')
    SlurmCommands.resolve(fake.bin_dir, fake.conf, 10).run(
        str(fake.bin_dir / "squeue"), "a b; rm -rf /", "$X"
    )
    assert (fake.data_dir / "argv").read_text() == "a b; rm -rf /\n$X\n"


def test_a_command_past_its_timeout_is_killed(fake: FakeSlurm) -> None:
    pid_file = fake.data_dir / "pid"
    fake.write_program("squeue", f"echo $$ > {pid_file}\nexec sleep 60\n")
    commands = SlurmCommands.resolve(fake.bin_dir, fake.conf, 0.3)
    start = time.monotonic()
    with pytest.raises(CommandError, match=r"squeue: no answer within 0.3 s \(killed\)"):
        commands.jobs_json()
    assert time.monotonic() - start < 30
    pid = int(pid_file.read_text())
    assert wait_for(lambda: not Path(f"/proc/{pid}").exists(), 10)


def test_a_failing_command_is_a_command_error_with_its_message(fake: FakeSlurm) -> None:
    fake.use("down")
    commands = SlurmCommands.resolve(fake.bin_dir, fake.conf, 10)
    with pytest.raises(
        CommandError, match="scontrol: exit 1: slurm_load_partitions error: Unable to contact"
    ):
        commands.partitions_text()


def test_a_program_that_cannot_run(fake: FakeSlurm) -> None:
    (fake.bin_dir / "sinfo").chmod(0o644)
    with pytest.raises(CommandError, match="not an executable file"):
        SlurmCommands.resolve(fake.bin_dir, fake.conf, 10)
    commands = SlurmCommands.resolve(None, None, 10)
    with pytest.raises(CommandError, match="sinfo: cannot start: Permission denied"):
        commands.run(str(fake.bin_dir / "sinfo"))


def test_programs_are_found_on_path(fake: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert resolve_program("squeue", None) == str(fake.bin_dir / "squeue")
    monkeypatch.setenv("PATH", str(fake.data_dir))
    with pytest.raises(CommandError, match="not on PATH"):
        resolve_program("squeue", None)


def test_reader_reads_a_whole_poll_and_stops_at_the_first_failure(fake: FakeSlurm) -> None:
    reader = SlurmReader(SlurmCommands.resolve(fake.bin_dir, fake.conf, 10))
    snapshot = reader.read()
    assert [pool.name for pool in snapshot.pools] == ["inference", "training"]
    fake.use("down")
    fake.write_program("squeue", "echo squeue must not run >&2; exit 3\n")
    with pytest.raises(SlurmReportedError, match="sinfo reported"):
        reader.read()
