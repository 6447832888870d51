"""Source: a demo run directory (`ibpool demo --out DIR`): series CSVs, timeline.json and effects.json."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from postmortem.model import Effect, Event, InputError, Point, RunData, parse_time

EFFECT_METRICS = (
    "utilization",
    "allocated_gpus",
    "pending_gpus",
    "pending_gpu_minutes_per_hour",
    "iteration_seconds",
    "slowdown",
)
TIMELINE_KINDS = frozenset(
    {"scenario", "fault", "alert", "resolved", "proposal", "approval", "refusal", "apply"}
)


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _float(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _start(rows: list[dict[str, str]], path: Path) -> float:
    """Unix seconds of simulated t=0: a row's RFC 3339 time less its `t`."""
    for row in rows:
        t = _float(row.get("t"))
        if t is not None and row.get("time"):
            return parse_time(row["time"]) - t
    raise InputError(f"{path}: no rows with a time")


def _append(series: dict[str, list[Point]], key: str, at: float, value: float | None) -> None:
    if value is not None:
        series.setdefault(key, []).append((at, value))


def _link_label(row: dict[str, str]) -> str:
    link = row.get("link", "")
    if row.get("kind") == "fabric" and row.get("desc"):
        return f"{row['desc']}/{link.rsplit('/', 1)[-1]}"
    return link


def _effect(item: dict[str, Any], start: float) -> Effect:
    change, before, after = item["change"], item["before"], item["after"]
    pools = sorted(set(before.get("pools", {})) | set(after.get("pools", {})))
    metrics: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for pool in pools:
        b = before.get("pools", {}).get(pool, {})
        a = after.get("pools", {}).get(pool, {})
        metrics[pool] = {m: (b.get(m), a.get(m)) for m in EFFECT_METRICS}
    return Effect(
        at=start + float(change["t"]),
        proposal_id=str(change["proposal_id"]),
        kind=str(change["kind"]),
        policy=str(change["policy"]),
        changes=tuple((str(c[0]), str(c[1]), str(c[2])) for c in change.get("changes", [])),
        expected_effect=str(change.get("expected_effect", "")),
        before=(start + float(before["start"]), start + float(before["end"])),
        after=(start + float(after["start"]), start + float(after["end"])),
        metrics=metrics,
    )


def load(directory: Path) -> RunData:
    """Read a run directory; InputError names the first missing or unreadable file."""
    if not directory.is_dir():
        raise InputError(f"no run directory at {directory}")
    for name in ("timeline.json", "series/pools.csv", "series/links.csv"):
        if not (directory / name).is_file():
            raise InputError(f"{directory}: missing {name} (is this an `ibpool demo --out` directory?)")
    pools = _rows(directory / "series" / "pools.csv")
    links = _rows(directory / "series" / "links.csv")
    start = _start(pools or links, directory / "series" / "pools.csv")
    data = RunData(source=f"run directory {directory}")
    for row in pools:
        t = _float(row.get("t"))
        if t is None:
            continue
        _append(data.utilization, row["pool"], start + t, _float(row.get("gpu_utilization")))
        _append(data.pending, row["pool"], start + t, _float(row.get("pending_gpus")))
    for row in links:
        t = _float(row.get("t"))
        if t is not None:
            _append(data.congestion, _link_label(row), start + t, _float(row.get("congestion")))
    try:
        timeline = json.loads((directory / "timeline.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {directory / 'timeline.json'}: {exc}") from None
    for item in timeline:
        if item.get("kind") not in TIMELINE_KINDS:
            continue
        detail = item.get("detail") or {}
        name = str(detail.get("alert", "")) if item["kind"] in ("alert", "resolved") else ""
        if item["kind"] == "proposal":
            name = str(detail.get("id", ""))
        data.events.append(Event(start + float(item["t"]), str(item["kind"]), str(item["summary"]), name))
    effects_path = directory / "effects.json"
    if effects_path.is_file():
        try:
            data.effects = [_effect(e, start) for e in json.loads(effects_path.read_text(encoding="utf-8"))]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"cannot read {effects_path}: {exc}") from None
    return data
