"""`ibpool backtest` end to end on a slice of the real shared trace."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from recommender.backtest import cli
from recommender.backtest.trace import load_trace, slice_trace
from tests.helpers import TRACE

FIELDS = (
    "pending_gpu_minutes",
    "served_gpu_minutes",
    "coverage",
    "allocation_utilization",
    "moves",
    "moves_per_pool_day",
    "reversals_within_60min",
    "worst_pool_p95_wait_ratio_vs_static",
)


@pytest.fixture(scope="module")
def real_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """May 2-3 of the shared trace (a busy stretch) as a gzip CSV."""
    trace = slice_trace(load_trace(TRACE), 1440, 3 * 1440)
    out = tmp_path_factory.mktemp("trace") / "slice.csv.gz"
    with gzip.open(out, "wt", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["time", "pool", "total_gpus", "running_gpus", "pending_gpus"])
        for step in range(trace.steps):
            stamp = trace.time_at(step).strftime("%Y-%m-%d %H:%M:%S")
            for p, pool in enumerate(trace.pools):
                writer.writerow(
                    [stamp, pool, trace.capacity[p][step], trace.running[p][step], trace.pending[p][step]]
                )
    return out


def test_cli_writes_the_report(real_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    code = cli.main(["--trace", str(real_slice), "--out", str(out), "--eval-from", "2020-05-02T12:00:00"])
    assert code == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["meta"]["pools"] == 16 and report["meta"]["eval_days"] == 1.5
    for name in ("policy", "static", "sharing", "hindsight"):
        assert all(isinstance(report[name][field], int | float) for field in FIELDS)
        assert len(report[name]["pools"]) == 16
    assert report["static"]["moves"] == 0
    assert 0 < report["static"]["coverage"] < 1
    assert report["bound"]["coverage"] >= report["policy"]["coverage"] >= report["static"]["coverage"]
    assert report["bound"]["coverage"] >= report["hindsight"]["coverage"]
    table = capsys.readouterr().out
    assert "policy" in table and "worst p99 ratio" in table and "beyond static" in table
    assert "take-backs" in table  # the per-pool table
    targets = report["policy"]["targets"]
    assert set(targets) == {"ceiling", "moves", "reversals", "p95", "p99", "coverage"}
    assert targets["coverage"]["value"] == report["policy"]["coverage"]
    assert targets["coverage"]["limit"] == 0.85
    assert targets["moves"]["met"] == (report["policy"]["moves_per_pool_day"] <= 0.5)
    assert "policy against the targets:" in table and "coverage (a busier cluster's weeks)" in table
    assert "unmet GPU-minutes beside idle nodes elsewhere" in table


def test_cli_rejects_bad_input(real_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    assert cli.main(["--trace", str(tmp_path / "missing.csv"), "--out", str(out)]) == 2
    assert cli.main(["--trace", str(real_slice), "--out", str(out), "--policy-param", "bogus=1"]) == 2
    assert cli.main(["--trace", str(real_slice), "--out", str(out), "--policy-param", "cooldown_min"]) == 2
    args = ["--trace", str(real_slice), "--out", str(out), "--eval-from", "2030-01-01"]
    assert cli.main(args) == 2
    assert "ibpool backtest:" in capsys.readouterr().err
    assert not out.exists()


def test_cli_skips_a_few_malformed_rows_and_says_so(
    real_slice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with gzip.open(real_slice, "rt", newline="") as handle:
        lines = handle.read().splitlines()
    lines[5] = lines[5].rsplit(",", 1)[0] + ",NaN"  # a pending value a broken exporter could write
    damaged, out = tmp_path / "damaged.csv", tmp_path / "report.json"
    damaged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli.main(["--trace", str(damaged), "--out", str(out), "--quiet"]) == 0
    meta = json.loads(out.read_text(encoding="utf-8"))["meta"]
    assert meta["rows_skipped"] == 1 and meta["rows_skipped_reasons"][0].startswith("line 6:")
    assert "skipped 1 malformed rows (line 6:" in capsys.readouterr().err
