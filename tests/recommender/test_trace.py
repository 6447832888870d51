"""Reading per-pool minute traces."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from recommender.backtest.errors import TraceError
from recommender.backtest.trace import load_trace, parse_trace

CSV = """time,pool,total_gpus,running_gpus,pending_gpus,running_jobs,pending_jobs
2020-05-01 00:00:00,b,20,4,0,1,0
2020-05-01 00:00:00,a,16,16,8,2,1
2020-05-01 00:01:00,a,16,18,0,2,0
2020-05-01 00:01:00,b,20,0,0,0,0
2020-05-01 00:03:00,a,16,0,0,0,0
"""


def test_parse_fills_gaps_sorts_pools_and_clamps_running() -> None:
    trace = parse_trace(CSV.splitlines())
    assert trace.pools == ("a", "b")
    assert trace.step_min == 1.0 and trace.steps == 4
    assert trace.running[0] == [16, 16, 16, 0]  # 18 > 16 is clamped; the missing minute repeats
    assert trace.pending[0] == [8, 0, 0, 0]
    assert trace.capacity[1] == [20, 20, 20, 20]
    assert trace.running_clamped >= 1
    assert trace.demand(0) == [24, 16, 16, 0]


def test_load_reads_gzip_and_plain(tmp_path: Path) -> None:
    plain, packed = tmp_path / "t.csv", tmp_path / "t.csv.gz"
    plain.write_text(CSV, encoding="utf-8")
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(CSV)
    assert load_trace(plain) == load_trace(packed)


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="missing columns pending_gpus"):
        parse_trace(["time,pool,total_gpus,running_gpus", "2020-05-01,a,8,8"])
    with pytest.raises(TraceError, match="line 2"):
        parse_trace(["time,pool,total_gpus,running_gpus,pending_gpus", "2020-05-01,a,eight,8,0"])
    with pytest.raises(TraceError, match="no data rows"):
        parse_trace(["time,pool,total_gpus,running_gpus,pending_gpus"])
    with pytest.raises(TraceError, match="nope"):
        load_trace(tmp_path / "nope.csv")


def test_unix_seconds_and_five_minute_steps() -> None:
    rows = ["time,pool,total_gpus,running_gpus,pending_gpus"]
    rows += [f"{1588291200 + 300 * i},a,8,8,{i}" for i in range(3)]
    trace = parse_trace(rows)
    assert trace.step_min == 5.0 and trace.pending[0] == [0, 1, 2]


def _stamp(minute: int) -> str:
    return f"2020-05-01 {minute // 60:02d}:{minute % 60:02d}:00"


def test_a_few_malformed_rows_are_skipped_like_missing_ones_and_counted() -> None:
    rows = ["time,pool,total_gpus,running_gpus,pending_gpus"]
    rows += [f"{_stamp(m)},a,16,{m % 8},1" for m in range(150)]
    rows += [f"{_stamp(m)},b,8,1,0" for m in range(150)]
    rows[11] = f"{_stamp(10)},a,16,,1"  # a missing field
    rows[200] = "2020-05-01 01:xx:00,c,8,nan,0"  # a bad stamp and a NaN in the same row
    trace = parse_trace(rows)
    assert trace.pools == ("a", "b") and trace.steps == 150
    assert trace.rows_skipped == 2
    assert [r.split(":")[0] for r in trace.skipped_reasons] == ["line 12", "line 201"]
    assert trace.running[0][10] == trace.running[0][9] == 1  # the dropped minute repeats the last row
    assert trace.running[0][11] == 3


def test_many_malformed_rows_refuse_the_file() -> None:
    rows = ["time,pool,total_gpus,running_gpus,pending_gpus"]
    rows += [f"{_stamp(m)},a,16,1,0" for m in range(60)]
    rows += [f"{_stamp(60)},,16,1,0"]  # 1 bad of 61 is more than 1%
    with pytest.raises(TraceError, match=r"1 malformed rows of 61: line 62: empty pool name"):
        parse_trace(rows)


def test_a_bad_stamp_does_not_place_a_later_row() -> None:
    rows = ["time,pool,total_gpus,running_gpus,pending_gpus"]
    rows += [f"{_stamp(m)},a,16,{m},0" for m in range(16)] * 14
    rows += ["yesterday,a,16,9,0"] * 2  # the second must fail too, not land on minute 0
    trace = parse_trace(rows)
    assert trace.rows_skipped == 2 and trace.running[0] == list(range(16))
