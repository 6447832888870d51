"""`ibpool demo --fast` end to end through `main(argv)` (one run for the module): the loop proposes,
applies and saves; the summary leads with the loop against its static twin; the alerts come from the
shipped rules replayed by vmalert; each applied change carries its counterfactual."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from demo.cli import main
from demo.scenario import PRIORITY_JOB
from demo.settings import FAST

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "run"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["--fast", "--out", str(out)]) == 0
    return out, buffer.getvalue()


def _shipped_alerts() -> set[str]:
    data = yaml.safe_load((REPO / "alerts" / "alert_rules.yml").read_text())
    return {rule["alert"] for group in data["groups"] for rule in group["rules"] if "alert" in rule}


@pytest.mark.slow
def test_the_summary_leads_with_loop_against_static(fast_run: tuple[Path, str]) -> None:
    out, text = fast_run
    summary = text[text.index("ibpool demo (fast)") :]
    first = summary[: summary.index("\nSeen")]
    assert "Did the loop help?" in first
    assert "static (partitions and QoS tables left as configured) is the baseline" in first
    for metric in (
        "GPU allocation, overall",
        "GPU allocation, recsys",
        "GPU utilization, llm",
        "GPU-hours served, overall",
        "pending GPU-minutes, recsys",
        "job wait p50/p95/p99 (min), overall",
        f"priority job {PRIORITY_JOB} iteration (x alone)",
    ):
        assert re.search(rf"^  {re.escape(metric)}\s+\S", first, re.M), metric
    twin = json.loads((out / "twin.json").read_text())
    assert twin["replay_matches"], twin["mismatch"]  # the replayed loop run ended where the live one did
    loop, static = twin["loop"]["priority"], twin["static"]["priority"]
    # the quota changes gave the priority job back most of its bandwidth; static kept it slowed down
    assert loop["iteration_seconds"] < static["iteration_seconds"]
    assert static["slowdown"] > 1.3
    assert twin["loop"]["pools"] != twin["static"]["pools"]
    row = re.search(rf"priority job {PRIORITY_JOB} iteration \(x alone\)\s+(\d+) ms .*?\s+(\d+) ms", first)
    assert row is not None
    assert int(row.group(2)) < int(row.group(1))


@pytest.mark.slow
def test_progress_lines_and_the_run_clock(fast_run: tuple[Path, str]) -> None:
    out, text = fast_run
    assert re.search(r"^\[\d{4}-\d\d-\d\d 0[67]:\d\d\] proposal ", text, re.M)
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d\] status ", text, re.M)
    assert "auto-approved by policy:demo" in text
    assert "lose_gpu node0016/gpu3" in text
    start = json.loads((out / "run.json").read_text())["start"]
    assert start % 86400 == 6 * 3600  # the run's clock starts at 06:00 UTC


@pytest.mark.slow
def test_alerts_come_from_the_shipped_rules(fast_run: tuple[Path, str]) -> None:
    out, text = fast_run
    alerts = json.loads((out / "alerts.json").read_text())
    assert alerts["status"] == "replayed"
    assert {Path(p).name for p in alerts["rules"]} == {"alert_rules.yml", "recording_rules.yml"}
    names = {f["name"] for f in alerts["firings"]}
    assert {"IbPortCongested", "GpuFellOffBus", "GpuXidError", "GpuPoolImbalanced"} <= names
    assert names <= _shipped_alerts()  # no alert the rule files do not define (NodeUnavailable is gone)
    congested = [f for f in alerts["firings"] if f["name"] == "IbPortCongested"]
    assert {f["severity"] for f in congested} == {"warning", "critical"}
    assert all(f["duration"] > 0 and f["duration"] % 60 == 0 for f in alerts["firings"])
    # The fault is first scraped at the next cycle; GpuXidError has `for: 1m`. One XID, one alert.
    (xid,) = [f for f in alerts["firings"] if f["name"] == "GpuXidError"]
    start = json.loads((out / "run.json").read_text())["start"]
    next_scrape = (FAST.fault_at // FAST.cycle_seconds + 1) * FAST.cycle_seconds
    assert xid["start"] - start == next_scrape + 60
    assert "vmalert replaying" in text
    assert re.search(r"IbPortCongested critical .* for \d", text)
    assert not (REPO / "demo" / "alerts.py").exists()
    assert (out / "series" / "metrics.jsonl.gz").stat().st_size > 1000


@pytest.mark.slow
def test_each_change_has_its_counterfactual(fast_run: tuple[Path, str]) -> None:
    out, text = fast_run
    applied = int(re.search(r"^Applied: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    assert applied >= 1
    assert re.search(r"set_vl_weights \w{12} by policy:quota", text)
    assert "with it vs without it" in text
    assert re.search(r"REGRESSION: llm multi-node slowdown", text)  # the cost to the other pool, flagged
    effects = json.loads((out / "effects.json").read_text())
    assert len(effects) == applied
    first = effects[0]["counterfactual"]
    hi = first["metrics"]["recsys"]["multinode_slowdown"]
    assert hi[1] < hi[0]  # with the quota change the high-priority pool's jobs ran faster than without
    assert any(r["pool"] == "llm" for r in first["regressions"])


@pytest.mark.slow
def test_the_run_directory_keeps_everything(fast_run: tuple[Path, str]) -> None:
    out, text = fast_run
    timeline = json.loads((out / "timeline.json").read_text())
    kinds = {event["kind"] for event in timeline}
    assert {"scenario", "fault", "proposal", "approval", "apply", "status"} <= kinds
    assert all({"t", "time", "kind", "summary", "detail"} <= set(e) for e in timeline)
    assert len((out / "timeline.jsonl").read_text().splitlines()) == len(timeline)
    with (out / "series" / "pools.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["pool"] for r in rows} == {"recsys", "llm"}
    assert len(rows) >= 60
    with (out / "series" / "links.csv").open() as handle:
        assert any(float(r["congestion"] or 0) >= 0.2 for r in csv.DictReader(handle))
    proposals = json.loads((out / "proposals.json").read_text())
    applied = sum(p["state"] == "applied" for p in proposals)
    assert all(
        any(a["who"] == "policy:demo" for a in p["audit"]) for p in proposals if p["state"] == "applied"
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["applied"] == applied
    assert summary["alerts"]["status"] == "replayed"
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
