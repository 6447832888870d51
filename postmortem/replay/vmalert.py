"""`vmalert -replay.*` over a store: which alerts of a rule set fired when, with severity and duration.

The rules are the rule files' own (`RuleSet`); vmalert evaluates them over [start, end] at the evaluation
interval (1 minute, what the rules are written for), reading the store's series and writing the recording
rules' results and the `ALERTS` series back into it. Levels run one after the other with a flush in
between, so a rule that reads a recording rule sees its results (vmalert itself only waits
`-replay.rulesDelay` between rules, which is no guarantee). The firing runs are then read back from
`ALERTS{alertstate="firing"}`: a run ends when its samples stop for more than one and a half intervals.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from postmortem.replay.errors import ReplayError
from postmortem.replay.rules import RuleSet
from postmortem.replay.store import ScratchStore, program

INTERVAL_SECONDS = 60.0
HIDDEN_LABELS = frozenset({"__name__", "alertname", "alertstate", "alertgroup", "severity"})


@dataclass(frozen=True)
class Firing:
    """One run of an alert in state firing: [start, end), end None while still firing at the window's end."""

    name: str
    severity: str
    group: str
    labels: Mapping[str, str]
    start: float
    end: float | None
    last: float  # the last evaluation that found it firing
    interval: float = INTERVAL_SECONDS

    def duration(self) -> float:
        """Seconds it fired (until the window's end when still firing)."""
        return (self.end if self.end is not None else self.last + self.interval) - self.start

    def describe_labels(self) -> str:
        """`k=v,...` of the series' own labels (sorted)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))


@dataclass
class ReplayResult:
    """The firings of a replay, and how it ran."""

    firings: list[Firing] = field(default_factory=list)
    levels: int = 0
    rules: int = 0
    start: float = 0.0
    end: float = 0.0


def _stamp(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_levels(
    store: ScratchStore, rules: RuleSet, start: float, end: float, interval: float = INTERVAL_SECONDS
) -> int:
    """Replay every level of `rules` over [start, end] into `store`; the number of levels run."""
    binary = program("vmalert")
    step = f"{int(interval)}s"
    texts = rules.levels()
    for index, text in enumerate(texts):
        path = store.storage / f"rules-level{index}.yml"
        path.write_text(text, encoding="utf-8")
        argv = [
            binary,
            f"-rule={path}",
            f"-datasource.url={store.url}",
            f"-remoteWrite.url={store.url}",
            f"-replay.timeFrom={_stamp(start)}",
            f"-replay.timeTo={_stamp(end)}",
            "-replay.disableProgressBar",
            "-replay.rulesDelay=0s",
            "-replay.maxDatapointsPerQuery=10000",
            f"-evaluationInterval={step}",
            f"-datasource.queryStep={step}",
            "-remoteWrite.flushInterval=200ms",
            "-loggerLevel=ERROR",
        ]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=600.0, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ReplayError(f"vmalert (level {index}): {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-600:]
            raise ReplayError(f"vmalert exited with {done.returncode} (level {index}): {tail}")
        store.flush()
    return len(texts)


def firings(
    store: ScratchStore, start: float, end: float, interval: float = INTERVAL_SECONDS
) -> list[Firing]:
    """The firing runs in the store's `ALERTS` series, in time and name order."""
    out: list[Firing] = []
    for series in store.export('ALERTS{alertstate="firing"}', start - interval, end + interval):
        metric = {str(k): str(v) for k, v in series.get("metric", {}).items()}
        times = sorted({int(t) / 1000.0 for t in series.get("timestamps", [])})
        labels = {k: v for k, v in metric.items() if k not in HIDDEN_LABELS}
        for run in _runs(times, interval):
            last = run[-1]
            ended = last + interval if last + interval <= end else None
            out.append(
                Firing(
                    name=metric.get("alertname", "?"),
                    severity=metric.get("severity", ""),
                    group=metric.get("alertgroup", ""),
                    labels=labels,
                    start=run[0],
                    end=ended,
                    last=last,
                    interval=interval,
                )
            )
    out.sort(key=lambda f: (f.start, f.name, f.severity, f.describe_labels()))
    return out


def _runs(times: list[float], interval: float) -> list[list[float]]:
    runs: list[list[float]] = []
    for previous, current in itertools.pairwise([None, *times]):
        if previous is None or current is None or current - previous > 1.5 * interval:
            runs.append([])
        if current is not None:
            runs[-1].append(current)
    return [r for r in runs if r]


def replay(
    store: ScratchStore, rules: RuleSet, start: float, end: float, interval: float = INTERVAL_SECONDS
) -> ReplayResult:
    """Run the rules over the store's series in [start, end] and read back what fired."""
    start = float(int(start // interval) * interval)
    end = float(-int(-end // interval) * interval)
    levels = run_levels(store, rules, start, end, interval)
    return ReplayResult(firings(store, start, end, interval), levels, len(rules.rules), start, end)


def replay_lines(
    data: bytes, rules: RuleSet, start: float, end: float, interval: float = INTERVAL_SECONDS
) -> ReplayResult:
    """Replay over series given as VictoriaMetrics JSON lines, in a scratch store of its own."""
    with ScratchStore.start() as store:
        store.import_lines(data)
        store.flush()
        return replay(store, rules, start, end, interval)
