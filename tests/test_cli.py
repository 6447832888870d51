"""The `ibpool` command: every subcommand resolves to a module with `main`, and the top-level flags."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.version import __version__
from ibpool.cli import COMMANDS, SIMULATED_EXPORTER, main, resolve
from proposals.store import Store


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_main_and_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert callable(COMMANDS[name].main())
    try:
        status = main([name, "--help"])
    except SystemExit as exited:  # argparse's --help exits; some commands catch it and return
        status = int(exited.code or 0)
    assert status == 0
    assert "usage:" in capsys.readouterr().out


def test_simulate_flag_picks_the_simulated_exporter() -> None:
    assert resolve("exporter", ["--simulate", "--web.listen-address", ":0"]) is SIMULATED_EXPORTER
    assert resolve("exporter", ["--simulate.gpus", "2"]) is SIMULATED_EXPORTER
    assert resolve("exporter", ["--web.listen-address", ":0"]) is COMMANDS["exporter"]


def test_version_help_and_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ibpool {__version__}\n"
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
    assert main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err
    assert main([]) == 2


def test_bash_completion_completes_commands_and_flags(tmp_path: Path) -> None:
    """The script, sourced in a real bash with `ibpool` on PATH, completes a command and its flags."""
    assert main(["completion", "zsh"]) == 2
    shim = tmp_path / "ibpool"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m ibpool "$@"\n')
    shim.chmod(0o755)
    script = (
        'eval "$(ibpool completion bash)"\n'
        'COMP_WORDS=(ibpool fab); COMP_CWORD=1; _ibpool; echo "${COMPREPLY[*]}"\n'
        'COMP_WORDS=(ibpool fabric-exporter --fabric.sw); COMP_CWORD=2; _ibpool; echo "${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    commands, flags = out.splitlines()
    assert commands == "fabric-exporter"
    assert flags.startswith("--fabric.sweep-interval-seconds")


OLD_AND_NEW = [
    (
        "exporter.fabric.config",
        [
            "--fabric.sweep-interval=5",
            "--fabric.command-timeout=3",
            "--fabric.forget-after=60",
            "--ibdiag.timeout=9",
        ],
        [
            "--fabric.sweep-interval-seconds=5",
            "--fabric.command-timeout-seconds=3",
            "--fabric.forget-after-seconds=60",
            "--ibdiag.timeout-ms=9",
        ],
    ),
    (
        "simulator.serve.config",
        ["--sweep-interval=2", "--poll-interval=3", "--warmup=60"],
        ["--fabric.sweep-interval-seconds=2", "--slurm.poll-interval-seconds=3", "--warmup-seconds=60"],
    ),
]


@pytest.mark.parametrize(("module", "old", "new"), OLD_AND_NEW)
def test_old_flag_spellings_still_parse_to_the_same_config(
    module: str, old: list[str], new: list[str]
) -> None:
    settings = importlib.import_module(module).SETTINGS
    assert settings.load(old) == settings.load(new)
    shown = settings.parser().format_help()
    assert all(flag.split("=")[0] in shown for flag in new)
    assert not any(f"{flag.split('=')[0]} " in shown for flag in old)


def test_old_spellings_of_the_argparse_commands(tmp_path: Path) -> None:
    from recommender import cli as recommend  # noqa: PLC0415 (only this test needs it)

    args = recommend.parser().parse_args(["--interval", "7", "--max-age", "9", "--embedded.targets", "x"])
    cfg = recommend.load(args)
    assert (cfg.interval_seconds, cfg.max_age_seconds) == (7.0, 9.0)
    Store(tmp_path / "p.db").close()
    assert main(["proposals", "--log-level", "debug", "--db", str(tmp_path / "p.db"), "list"]) == 0
    assert main(["proposals", "--log.level", "debug", "--db", str(tmp_path / "p.db"), "list"]) == 0
