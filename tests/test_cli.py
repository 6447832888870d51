"""The `ibpool` command: every subcommand resolves to a module with `main`, and the top-level flags."""

from __future__ import annotations

import pytest

from foundation.version import __version__
from ibpool.cli import COMMANDS, SIMULATED_EXPORTER, main, resolve


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
