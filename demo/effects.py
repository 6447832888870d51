"""What each applied change did: the series before it (while its evidence held) and after it.

Before: the cycles from when the evidence started to hold (the policy's persistence window before the
proposal) up to the apply. After: the cycles in the effect window that follows (clipped at the end of the
run). Per pool: mean GPU utilization, mean allocated and pending GPUs, pending GPU-minutes per hour of the
window; for the high-priority pool: the mean iteration time and slowdown of its multi-node jobs. Changes
close together overlap: each window is measured as it is, not attributed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from demo.run import AppliedChange, Sample


@dataclass(frozen=True)
class PoolWindow:
    """One pool over one window."""

    utilization: float | None
    allocated_gpus: float | None
    pending_gpus: float | None
    pending_gpu_minutes_per_hour: float | None
    iteration_seconds: float | None
    slowdown: float | None


@dataclass(frozen=True)
class Window:
    """A window of samples: [start, end] in simulated seconds."""

    start: float
    end: float
    samples: int
    pools: dict[str, PoolWindow]


@dataclass(frozen=True)
class Effect:
    """One applied change and the windows around it."""

    change: AppliedChange
    before: Window
    after: Window

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"change": asdict(self.change), "before": asdict(self.before), "after": asdict(self.after)}


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def window(samples: Sequence[Sample], start: float, end: float, cycle_seconds: float) -> Window:
    """The samples with start <= t <= end, summarised per pool."""
    chosen = [s for s in samples if start - 1e-6 <= s.t <= end + 1e-6]
    names = sorted({name for s in chosen for name in s.pools})
    pools: dict[str, PoolWindow] = {}
    hours = len(chosen) * cycle_seconds / 3600.0
    for name in names:
        rows = [s.pools[name] for s in chosen if name in s.pools]
        minutes = sum(r.pending_gpus for r in rows) * cycle_seconds / 60.0
        pools[name] = PoolWindow(
            utilization=_mean([r.utilization for r in rows]),
            allocated_gpus=_mean([float(r.allocated_gpus) for r in rows]),
            pending_gpus=_mean([float(r.pending_gpus) for r in rows]),
            pending_gpu_minutes_per_hour=minutes / hours if hours > 0 else None,
            iteration_seconds=_mean([r.iteration_seconds for r in rows]),
            slowdown=_mean([r.slowdown_mean for r in rows]),
        )
    first = chosen[0].t if chosen else start
    last = chosen[-1].t if chosen else end
    return Window(first, last, len(chosen), pools)


def measure(
    samples: Sequence[Sample], applied: Sequence[AppliedChange], effect_seconds: float, cycle_seconds: float
) -> list[Effect]:
    """Before and after every applied change."""
    out = []
    for change in applied:
        before = window(samples, change.evidence_since, change.t, cycle_seconds)
        after = window(samples, change.t + cycle_seconds, change.t + effect_seconds, cycle_seconds)
        out.append(Effect(change, before, after))
    return out
