"""`--real` stops ibsim, OpenSM and Slurm when the demo fails after start-up, and when start-up fails."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from demo.loop import Loop
from demo.real import RealBackends, missing
from demo.real.scenario import real_model
from demo.series import SeriesRecorder
from demo.settings import FAST
from simulator.backends.errors import SlurmError
from simulator.backends.processes import Processes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing()), reason=f"--real needs {', '.join(missing())}"),
]


def _contexts(backends: RealBackends) -> tuple[Processes, Processes]:
    return backends.fabric.ibsim.processes, backends.slurm.cluster.processes


def _started(backends: RealBackends) -> set[str]:
    return {name for procs in _contexts(backends) for name, _ in procs.started}


def _raise_sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()  # SystemExit arrives from the handler


@pytest.mark.parametrize("failure", ["error", "ctrl-c", "sigterm"])
def test_a_failure_after_start_stops_every_real_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    if failure == "sigterm" and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM has a handler in this test process")

    def fail(self: Loop, settings: object) -> None:
        assert self.backends is not None and self.backends.lid > 0  # everything is up
        if failure == "error":
            raise RuntimeError("the demo loop failed")
        if failure == "ctrl-c":
            raise KeyboardInterrupt
        _raise_sigterm()

    monkeypatch.setattr(Loop, "_serve", fail)
    demo = Loop(FAST, tmp_path / "run", SeriesRecorder(()), say=lambda _: None, real=True)
    expected = {"error": RuntimeError, "ctrl-c": KeyboardInterrupt, "sigterm": SystemExit}[failure]
    with pytest.raises(expected):
        demo.run()
    demo.run_dir.close()
    assert demo.backends is not None
    assert {"ibsim", "opensm", "slurmctld", "slurmd"} <= _started(demo.backends)
    for procs in _contexts(demo.backends):
        assert procs.running() == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the demo's handler is gone again


def test_slurm_failing_to_start_stops_the_fabric(tmp_path: Path) -> None:
    backends = RealBackends(tmp_path / "real", real_model(FAST))
    backends.slurm.cluster.binaries["slurmd"] = "/bin/false"  # slurmctld starts, then every slurmd fails
    with pytest.raises(SlurmError, match="slurmd"):
        backends.start()
    assert {"ibsim", "opensm", "slurmctld", "slurmd"} <= _started(backends)
    for procs in _contexts(backends):
        assert procs.running() == []
