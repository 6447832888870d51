"""Load a per-pool minute series (CSV, optionally gzip-compressed) into dense per-pool arrays.

Columns used: `time`, `pool`, `total_gpus`, `running_gpus`, `pending_gpus` (others are ignored). The
step is the most common gap between consecutive timestamps; a pool missing at a step repeats its last
row (before its first row it has nothing: no capacity, no demand). A row that cannot be parsed (a missing
or non-numeric field, a bad timestamp, no pool name) is dropped like a missing one while such rows stay
at most `MAX_BAD_ROW_SHARE` of the data rows, and counted with the first few reasons; more means the file
is not a trace, and loading fails listing them.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recommender.backtest.errors import TraceError

REQUIRED = ("time", "pool", "total_gpus", "running_gpus", "pending_gpus")
MAX_REPORTED = 10
MAX_BAD_ROW_SHARE = 0.01


@dataclass(frozen=True)
class Trace:
    """Per-pool series on a regular grid: `capacity[p][t]`, `running[p][t]`, `pending[p][t]` in GPUs."""

    pools: tuple[str, ...]
    start: datetime
    step_min: float
    capacity: tuple[list[int], ...]
    running: tuple[list[int], ...]
    pending: tuple[list[int], ...]
    running_clamped: int = 0
    rows_skipped: int = 0
    skipped_reasons: tuple[str, ...] = ()

    @property
    def steps(self) -> int:
        """Number of time steps."""
        return len(self.capacity[0]) if self.capacity else 0

    @property
    def days(self) -> float:
        """Length of the trace in days."""
        return self.steps * self.step_min / 1440.0

    def time_at(self, step: int) -> datetime:
        """Timestamp of a step."""
        return self.start + timedelta(minutes=step * self.step_min)

    def step_at(self, when: datetime) -> int:
        """First step at or after `when`, clipped to [0, steps]."""
        offset = (when - self.start).total_seconds() / 60.0 / self.step_min
        return min(self.steps, max(0, -int(-offset // 1)))

    def demand(self, pool: int) -> list[int]:
        """GPUs wanted by a pool at each step: running plus pending."""
        return [r + q for r, q in zip(self.running[pool], self.pending[pool], strict=True)]


def parse_time(text: str) -> datetime:
    """ISO-8601 (naive means UTC) or Unix seconds."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        value = datetime.fromtimestamp(float(text), tz=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _open_text(path: Path) -> io.TextIOBase:
    try:
        with path.open("rb") as probe:
            magic = probe.read(2)
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from exc
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return io.TextIOWrapper(path.open("rb"), encoding="utf-8", newline="")


def load_trace(path: Path) -> Trace:
    """Read a trace file; raise TraceError with every problem found (up to a few lines)."""
    with _open_text(path) as handle:
        try:
            return parse_trace(handle, str(path))
        except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
            raise TraceError(f"{path}: unreadable: {exc}") from exc


Row = tuple[int, int, int, int, int]


@dataclass
class _Rows:
    """What the CSV held: pool names in order of appearance, distinct timestamps, parsed rows, and the
    rows that could not be parsed (their count and the first few reasons)."""

    names: list[str]
    times: list[datetime]
    rows: list[Row]
    bad: int
    reasons: list[str]


def _read_rows(lines: Iterable[str], source: str) -> _Rows:
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise TraceError(f"{source}: empty file")
    names = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise TraceError(f"{source}: missing columns {', '.join(missing)} (header: {', '.join(names)})")
    col = [names.index(c) for c in REQUIRED]
    pools: dict[str, int] = {}
    stamps: dict[str, int] = {}
    times: list[datetime] = []
    rows: list[Row] = []
    errors: list[str] = []
    bad = 0
    for lineno, fields in enumerate(reader, start=2):
        if not fields:
            continue
        try:
            stamp, pool = fields[col[0]], fields[col[1]].strip()
            if not pool:
                raise ValueError("empty pool name")
            total, running, pending = (int(float(fields[c])) for c in col[2:])
            ti = stamps.get(stamp)
            if ti is None:
                times.append(parse_time(stamp))
                ti = stamps[stamp] = len(times) - 1
        except (IndexError, ValueError, OverflowError) as exc:
            bad += 1
            if len(errors) < MAX_REPORTED:
                errors.append(f"line {lineno}: {exc}")
            continue
        pi = pools.setdefault(pool, len(pools))
        rows.append((ti, pi, max(0, total), max(0, running), max(0, pending)))
    if bad > MAX_BAD_ROW_SHARE * (bad + len(rows)):
        raise TraceError(f"{source}: {bad} malformed rows of {bad + len(rows)}: " + "; ".join(errors))
    if not rows:
        raise TraceError(f"{source}: no data rows")
    return _Rows(list(pools), times, rows, bad, errors)


def _step_minutes(times: list[datetime]) -> float:
    ordered = sorted(set(times))
    if len(ordered) < 2:
        return 1.0
    gaps = Counter(round((b - a).total_seconds() / 60.0, 6) for a, b in itertools.pairwise(ordered))
    return float(gaps.most_common(1)[0][0])


def parse_trace(lines: Iterable[str], source: str = "<trace>") -> Trace:
    """Build a Trace from CSV lines (header first)."""
    read = _read_rows(lines, source)
    names, times, rows = read.names, read.times, read.rows
    step = _step_minutes(times)
    if step <= 0:
        raise TraceError(f"{source}: timestamps do not advance")
    start = min(times)
    grid = [round((t - start).total_seconds() / 60.0 / step) for t in times]
    steps = max(grid) + 1
    order = sorted(range(len(names)), key=lambda i: names[i])
    slot = {old: new for new, old in enumerate(order)}
    cells: list[list[Row | None]] = [[None] * steps for _ in names]
    for ti, pi, total, running, pending in rows:
        cells[slot[pi]][grid[ti]] = (ti, pi, total, running, pending)
    cap, run, pend = [], [], []
    clamped = 0
    for series in cells:
        c_row, r_row, p_row = [0] * steps, [0] * steps, [0] * steps
        last: Row | None = None
        for t in range(steps):
            last = series[t] or last
            if last is not None:
                total, running = last[2], last[3]
                if running > total:
                    clamped += 1
                    running = total
                c_row[t], r_row[t], p_row[t] = total, running, last[4]
        cap.append(c_row)
        run.append(r_row)
        pend.append(p_row)
    return Trace(
        pools=tuple(names[i] for i in order),
        start=start,
        step_min=step,
        capacity=tuple(cap),
        running=tuple(run),
        pending=tuple(pend),
        running_clamped=clamped,
        rows_skipped=read.bad,
        skipped_reasons=tuple(read.reasons),
    )


def slice_trace(trace: Trace, first: int, stop: int) -> Trace:
    """The steps [first, stop) of a trace."""
    return Trace(
        pools=trace.pools,
        start=trace.time_at(first),
        step_min=trace.step_min,
        capacity=tuple(s[first:stop] for s in trace.capacity),
        running=tuple(s[first:stop] for s in trace.running),
        pending=tuple(s[first:stop] for s in trace.pending),
        running_clamped=trace.running_clamped,
        rows_skipped=trace.rows_skipped,
        skipped_reasons=trace.skipped_reasons,
    )
