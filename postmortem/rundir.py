"""Source: a demo run directory (`ibpool demo --out DIR`).

series/pools.csv and series/links.csv (charts), timeline.json (scripted jobs, faults, proposals,
approvals, refusals, applies), alerts.json (what the rule engine fired from the shipped rules over the
run's recorded series, series/metrics.jsonl.gz), effects.json (each applied change with its
counterfactual from the twin: the same window without the change) and twin.json (the loop against the
static run). A run without alerts.json, effects.json or twin.json still loads; the report says what is
missing. `replay_with(rules)` replays other rule files over the same recorded series.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from postmortem import alerts as alert_views
from postmortem.model import COUNTERFACTUAL, Effect, Event, InputError, Point, RunData, Twin, parse_time

TIMELINE_KINDS = frozenset({"scenario", "fault", "proposal", "approval", "refusal", "apply"})
SERIES_FILE = Path("series") / "metrics.jsonl.gz"
TWIN_SERIES = {"allocation": "allocation", "utilization": "utilization"}


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


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def _effect(item: dict[str, Any], start: float) -> Effect:
    change, effect = item["change"], item.get("counterfactual")
    at = start + float(change.get("started", change["t"]))
    metrics: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    window = (at, at)
    regressions: tuple[str, ...] = ()
    if effect is not None:
        window = (start + float(effect["start"]), start + float(effect["end"]))
        for pool, values in effect["metrics"].items():
            metrics[str(pool)] = {str(m): (pair[0], pair[1]) for m, pair in values.items()}
        regressions = tuple(str(r["text"]) for r in effect.get("regressions", []))
    return Effect(
        at=at,
        proposal_id=str(change["proposal_id"]),
        kind=str(change["kind"]),
        policy=str(change["policy"]),
        changes=tuple((str(c[0]), str(c[1]), str(c[2])) for c in change.get("changes", [])),
        expected_effect=str(change.get("expected_effect", "")),
        before=window,
        after=window,
        metrics=metrics,
        basis=COUNTERFACTUAL,
        regressions=regressions,
    )


def _twin(data: dict[str, Any], start: float) -> Twin:
    series: dict[str, dict[str, list[Point]]] = {}
    for run in ("static", "loop"):
        measured = data[run]["series"]
        series[run] = {
            label: [(start + float(t), float(v)) for t, v in measured.get(key, [])]
            for key, label in TWIN_SERIES.items()
        }
    rows = tuple((str(a), str(b), str(c), str(d)) for a, b, c, d in data.get("rows", []))
    note = "" if data.get("replay_matches", True) else str(data.get("mismatch", ""))
    return Twin(rows, series, note)


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
    for item in _json(directory / "timeline.json"):
        if item.get("kind") not in TIMELINE_KINDS:
            continue
        detail = item.get("detail") or {}
        name = str(detail.get("id", "")) if item["kind"] == "proposal" else ""
        data.events.append(Event(start + float(item["t"]), str(item["kind"]), str(item["summary"]), name))
    _load_alerts(directory, data)
    if (directory / "effects.json").is_file():
        try:
            data.effects = [_effect(e, start) for e in _json(directory / "effects.json")]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"cannot read {directory / 'effects.json'}: {exc!r}") from None
    if (directory / "twin.json").is_file():
        try:
            data.twin = _twin(_json(directory / "twin.json"), start)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"cannot read {directory / 'twin.json'}: {exc!r}") from None
    return data


def _load_alerts(directory: Path, data: RunData) -> None:
    path = directory / "alerts.json"
    if not path.is_file():
        data.alert_source = "no alerts.json in the run directory: alerts were not replayed"
        return
    stored = _json(path)
    try:
        data.alerts = [alert_views.from_dict(a) for a in stored.get("firings", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {exc!r}") from None
    status = str(stored.get("status", ""))
    if status == "replayed":
        files = ", ".join(str(Path(f).name) for f in stored.get("rules", []))
        settings = stored.get("settings") or {}
        data.alert_source = f"replayed by vmalert from the rule files as shipped ({files})" + (
            f", with the run's site settings ({', '.join(sorted(settings))})" if settings else ""
        )
    else:
        data.alert_source = f"alerts {status}"
    data.events += alert_views.events(data.alerts)


def replay_with(directory: Path, data: RunData, rules: list[Path]) -> None:
    """Replace the run's alerts with what `rules` fire over its recorded series (the run's settings kept)."""
    run = _json(directory / "run.json") if (directory / "run.json").is_file() else {}
    settings = {str(k): str(v) for k, v in dict(run.get("rule_settings") or {}).items()}
    ruleset = alert_views.load_rules(rules, _applicable(settings, rules))
    start = float(run.get("start", 0.0)) or (data.span() or (0.0, 0.0))[0]
    end = start + float(run.get("duration_seconds", 0.0)) if run else (data.span() or (0.0, 0.0))[1]
    replayed = alert_views.replay_run(directory / SERIES_FILE, ruleset, start, end)
    data.events = [e for e in data.events if e.kind not in ("alert", "resolved")]
    data.alerts = replayed
    data.events += alert_views.events(replayed)
    names = ", ".join(str(p) for p in rules)
    data.alert_source = f"would have fired: replayed by vmalert from {names} over the run's series"


def _applicable(settings: dict[str, str], rules: list[Path]) -> dict[str, str]:
    """The run's settings that name recording rules of `rules` (other rule sets may lack them)."""
    try:
        names = {r.name for r in alert_views.load_rules(rules).rules if not r.is_alert}
    except InputError:
        return settings
    return {k: v for k, v in settings.items() if k in names}
