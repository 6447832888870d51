"""`ibpool demo --fast` end to end through `main(argv)`: it proposes, applies, measures and saves."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from demo.cli import main


@pytest.mark.slow
def test_fast_demo_closes_the_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["--fast", "--out", str(out)]) == 0
    text = capsys.readouterr().out

    # progress: one line per event and periodic status lines
    assert re.search(r"^\[\+00:\d\d:\d\d \d\d:\d\d\] proposal ", text, re.M)
    assert re.search(r"^\[\+\d\d:\d\d:\d\d \d\d:\d\d\] status ", text, re.M)
    assert "auto-approved by policy:demo" in text
    assert "lose_gpu node0024/gpu3" in text
    assert "IbPortCongested" in text

    # summary: at least one applied change with its measured effect, before and after, with numbers
    applied = int(re.search(r"^Applied: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    assert applied >= 1
    assert re.search(r"set_vl_weights \w{12} by policy:quota", text)
    row = re.search(r"recsys multi-node slowdown\s+([\d.]+)x\s+([\d.]+)x", text)
    assert row is not None
    assert float(row.group(2)) < float(row.group(1))  # the quota change relieved the high-priority pool
    assert re.search(r"recsys pending GPU-minutes per hour\s+\d+\s+\d+", text)

    # the run directory: timeline, series, proposals and effects for a post-mortem
    timeline = json.loads((out / "timeline.json").read_text())
    kinds = {event["kind"] for event in timeline}
    assert {"scenario", "fault", "alert", "proposal", "approval", "apply", "status"} <= kinds
    assert all({"t", "time", "kind", "summary", "detail"} <= set(e) for e in timeline)
    assert len((out / "timeline.jsonl").read_text().splitlines()) == len(timeline)
    with (out / "series" / "pools.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["pool"] for r in rows} == {"recsys", "llm"}
    assert len(rows) >= 20
    with (out / "series" / "links.csv").open() as handle:
        assert any(float(r["congestion"] or 0) >= 0.2 for r in csv.DictReader(handle))
    assert (out / "series" / "qos.csv").exists()
    proposals = json.loads((out / "proposals.json").read_text())
    assert sum(p["state"] == "applied" for p in proposals) == applied
    assert all(
        any(a["who"] == "policy:demo" for a in p["audit"]) for p in proposals if p["state"] == "applied"
    )
    effects = json.loads((out / "effects.json").read_text())
    assert len(effects) == applied
    first = effects[0]
    assert first["before"]["pools"]["recsys"]["slowdown"] > first["after"]["pools"]["recsys"]["slowdown"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["applied"] == applied
    assert (out / "ibpool.db").exists()
    assert str(out) in text


def test_real_without_its_programs_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("demo.cli.missing", lambda: ["ibsim", "slurmd"])
    assert main(["--real", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "--real needs ibsim, slurmd" in err
    assert not (tmp_path / "run").exists()  # refused before anything was created or started


def test_a_non_empty_run_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "keep.txt").write_text("x")
    assert main(["--fast", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
