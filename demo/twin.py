"""The counterfactual twin: the run replayed without the loop's changes, and each change without itself.

From the control log of the loop run (`demo.controls`), all model-only and deterministic: the loop run
replayed and measured (it must end where the live run ended, or the comparison says so); the static twin
(every call made while a change was applied left out); and per applied change two forks from its start,
without the later changes, one with it and one without it, followed for the effect window. A metric
worse with the change than without it beyond a tolerance is a regression (`postmortem.regressions`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from demo.controls import ControlLog, Entry, Replayer, keep_all, keep_untagged
from demo.measure import Measurement, Meter
from postmortem.regressions import Regression, find
from simulator.cluster.model import ClusterModel

log = logging.getLogger(__name__)

Pair = tuple[float | None, float | None]


@dataclass(frozen=True)
class ChangeEffect:
    """One applied change: the run with it and without it over [start, end] (later changes left out)."""

    tag: str
    start: float
    end: float
    with_change: Measurement
    without: Measurement
    regressions: tuple[Regression, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "proposal_id": self.tag,
            "start": self.start,
            "end": self.end,
            "with_change": self.with_change.to_dict(series=False),
            "without": self.without.to_dict(series=False),
            "metrics": effect_metrics(self.with_change, self.without),
            "regressions": [{**vars(r), "text": r.describe()} for r in self.regressions],
        }


@dataclass
class TwinResult:
    """Loop against static over the whole run, and every change's counterfactual."""

    loop: Measurement
    static: Measurement
    effects: list[ChangeEffect] = field(default_factory=list)
    replay_matches: bool = True
    mismatch: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "loop": self.loop.to_dict(),
            "static": self.static.to_dict(),
            "effects": [e.to_dict() for e in self.effects],
            "replay_matches": self.replay_matches,
            "mismatch": self.mismatch,
        }


EFFECT_METRICS = (
    "allocation",
    "utilization",
    "pending_gpu_minutes",
    "wait_p95_minutes",
    "multinode_slowdown",
    "gpu_hours_served",
)


def effect_metrics(with_change: Measurement, without: Measurement) -> dict[str, dict[str, Pair]]:
    """`metrics[pool][metric] = (without, with)` for every pool measured in both."""
    out: dict[str, dict[str, Pair]] = {}
    for pool in sorted(set(with_change.pools) & set(without.pools)):
        a, b = with_change.pools[pool], without.pools[pool]
        out[pool] = {m: (getattr(b, m), getattr(a, m)) for m in EFFECT_METRICS}
    return out


def regressions(with_change: Measurement, without: Measurement) -> tuple[Regression, ...]:
    """The metrics the change made worse beyond the tolerances, pool by pool."""
    return tuple(find(effect_metrics(with_change, without)))


def fingerprint(model: ClusterModel) -> tuple[object, ...]:
    """What two runs of the same calls must agree on."""
    jobs = sorted((j.id, j.state, round(j.progress, 3)) for j in model.jobs.values())
    return (round(model.now, 6), tuple(jobs), round(sum(model.fabric.xmit_bytes), -3))


def run_twins(
    make_model: Callable[[], ClusterModel],
    controls: ControlLog,
    live: ClusterModel,
    *,
    duration: float,
    every: float,
    window: float,
    priority_pool: str,
    priority_job: str,
) -> TwinResult:
    """Replay the log three ways (see the module docstring) and measure each."""

    def meter(start: float, end: float) -> Meter:
        return Meter(start, end, every, priority_pool, priority_job)

    entries = controls.entries
    whole = meter(0.0, duration)
    full = Replayer(make_model(), every, whole)
    forks: list[tuple[str, float, int, Replayer, Meter, Replayer, Meter]] = []
    started: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.tag is not None and entry.tag not in started:
            started.add(entry.tag)
            start = full.model.now
            on, off = meter(start, start + window), meter(start, start + window)
            forks.append((entry.tag, start, index, full.fork(on), on, full.fork(off), off))
        full.apply(entry, keep_all)
    if duration - full.model.now > 1e-9:
        full.advance(duration - full.model.now)
    matches = fingerprint(full.model) == fingerprint(live)
    mismatch = "" if matches else "the replay of the loop run did not end where the live run ended"
    if not matches:
        log.warning("%s: %s vs %s", mismatch, fingerprint(full.model)[:1], fingerprint(live)[:1])
    static_meter = meter(0.0, duration)
    static = Replayer(make_model(), every, static_meter)
    static.run(entries, keep_untagged, until=duration)
    result = TwinResult(whole.finish(full.model), static_meter.finish(static.model), [], matches, mismatch)
    for tag, start, index, on_run, on, off_run, off in forks:
        end = min(start + window, duration)
        later = entries[index:]
        on_run.run(later, _only(tag), until=end)
        off_run.run(later, keep_untagged, until=end)
        with_change, without = on.finish(on_run.model), off.finish(off_run.model)
        result.effects.append(
            ChangeEffect(tag, start, end, with_change, without, regressions(with_change, without))
        )
    return result


def _only(tag: str) -> Callable[[Entry], bool]:
    def keep(entry: Entry) -> bool:
        return entry.tag is None or entry.tag == tag

    return keep
