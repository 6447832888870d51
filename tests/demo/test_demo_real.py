"""`ibpool demo --real --fast`: the loop against real OpenSM on ibsim and a real Slurm, all stopped after."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from demo.cli import main
from demo.real import RealBackends, missing
from simulator.backends import parse_vlarb_tables

DAEMONS = ("ibsim", "opensm", "slurmctld", "slurmd")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing()), reason=f"--real needs {', '.join(missing())}"),
]


def _pids(name: str) -> set[int]:
    result = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True, check=False)
    return {int(pid) for pid in result.stdout.split()}


def test_real_fast_demo_applies_to_opensm_and_stops_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {name: _pids(name) for name in DAEMONS}
    seen: dict[str, str] = {}
    close: Callable[[RealBackends], None] = RealBackends.close

    def read_back_then_close(self: RealBackends) -> None:
        # While the fabric still runs: what OpenSM programmed on the first HCA port, and Slurm's partitions.
        try:
            if self.lid and "vlarb" not in seen:
                seen["vlarb"] = self.fabric.run_diag(["smpquery", "vlarb", str(self.lid), "1"])
                seen["sinfo"] = self.slurm.run("sinfo", "-h", "-a", "-o", "%R %N")
        finally:  # a failed read-back must not leave the fabric and Slurm running
            close(self)

    monkeypatch.setattr(RealBackends, "close", read_back_then_close)
    out = tmp_path / "run"
    assert main(["--real", "--fast", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "--real: a smaller cluster (8 nodes)" in text
    assert "reading the real OpenSM (smpquery on ibsim) and Slurm (sinfo) back" in text

    proposals = json.loads((out / "proposals.json").read_text())
    applied = [p for p in proposals if p["state"] == "applied"]
    assert applied, "no change was applied"
    osm = [c for p in applied for c in p["proposal"]["changes"] if c["target"] == "opensm.vlarb_low"]
    assert osm, "no QoS change reached OpenSM"
    # The real OpenSM programmed the last applied table on the fabric (smpquery, read by the test).
    _, low = parse_vlarb_tables(seen["vlarb"])
    expected = [tuple(int(x) for x in pair.split(":")) for pair in osm[-1]["after"].split(",")]
    assert [pair for pair in low if pair[1]] == [pair for pair in expected if pair[1]]
    assert re.search(r"^recsys node", seen["sinfo"], re.M)
    assert re.search(r"^llm node", seen["sinfo"], re.M)
    # ... and the model followed it (the sync event after each apply).
    timeline = json.loads((out / "timeline.json").read_text())
    synced = [e["summary"] for e in timeline if e["kind"] == "real"]
    assert any(osm[-1]["after"] in line for line in synced)

    for name in DAEMONS:
        assert _pids(name) <= before[name], f"{name} left running"
