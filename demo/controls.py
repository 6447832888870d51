"""Every change made to the demo's model, logged so that the run can be replayed with some changes left out.

`LoggedModel` is the cluster model with each mutating call (time advancing, job submissions, faults, QoS
and partition controls) appended to a `ControlLog` as it happens, with the tag set at that moment: the
applying proposal's id while a change is applied (and while `--real` feeds OpenSM's and Slurm's state
back), none otherwise. The model is deterministic for its spec and workload, so `replay` rebuilds the run
exactly from the log, and with a `keep` filter it rebuilds the run without the loop's changes (the static
twin) or without one of them (a change's counterfactual). Nested calls are logged once (the outer one).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import ClusterSpec
from simulator.cluster.workload import JobRequest

MUTATORS = (
    "submit",
    "set_vl_weights",
    "set_sl2vl",
    "set_pool_service_level",
    "set_partition_nodes",
    "drain",
    "resume",
    "inject_xid",
    "lose_gpu",
    "restore_gpu",
    "set_link",
    "flap_link",
    "add_symbol_errors",
    "saturate",
)


@dataclass(frozen=True)
class Entry:
    """One logged call: model time before it, the method, its arguments, the tag in force."""

    at: float
    op: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()
    tag: str | None = None


@dataclass
class ControlLog:
    """The calls in order, and the tag the next ones get."""

    entries: list[Entry] = field(default_factory=list)
    tag: str | None = None

    def tags(self) -> list[str]:
        """The tags in order of first use (one per applied change)."""
        seen: dict[str, None] = {}
        for entry in self.entries:
            if entry.tag is not None:
                seen.setdefault(entry.tag, None)
        return list(seen)

    def first(self, tag: str) -> float | None:
        """Model time of the first call with `tag`."""
        return next((e.at for e in self.entries if e.tag == tag), None)


class LoggedModel(ClusterModel):
    """A ClusterModel that logs every mutating call (see the module docstring)."""

    def __init__(
        self, spec: ClusterSpec, workload: Iterable[JobRequest] | None = None, log: ControlLog | None = None
    ) -> None:
        self.log = log if log is not None else ControlLog()
        self.workload = list(workload or ())
        self._depth = 0
        super().__init__(spec, self.workload)

    def fresh(self) -> ClusterModel:
        """A plain model as this one was at its start: same spec, same jobs to come (for replays)."""
        return ClusterModel(self.spec, self.workload)

    def _logged(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._depth == 0:
            self.log.entries.append(Entry(self.now, op, args, tuple(sorted(kwargs.items())), self.log.tag))
        self._depth += 1
        try:
            return getattr(super(), op)(*args, **kwargs)
        finally:
            self._depth -= 1

    def advance(self, seconds: float) -> None:
        """Advance and log it."""
        self._logged("advance", (seconds,), {})


def _mutator(op: str) -> Callable[..., Any]:
    def call(self: LoggedModel, *args: Any, **kwargs: Any) -> Any:
        return self._logged(op, args, kwargs)

    call.__name__ = op
    call.__doc__ = f"`ClusterModel.{op}`, logged."
    return call


for _op in MUTATORS:
    setattr(LoggedModel, _op, _mutator(_op))


Keep = Callable[[Entry], bool]
Probe = Callable[[ClusterModel], None]


@dataclass
class Replayer:
    """Replays a log into a plain model: `keep` chooses the calls, `probe` runs at every `every` seconds."""

    model: ClusterModel
    every: float = 60.0
    probe: Probe | None = None
    tick: float = 10.0
    _next: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.tick = self.model.spec.tick_seconds
        self._next = self.model.now  # the first probe sees the start

    def advance(self, seconds: float) -> None:
        """Advance like the logged run did, stopping at probe times that fall on tick boundaries."""
        end = self.model.now + seconds
        aligned = _on_tick(seconds, self.tick) and _on_tick(self.model.now, self.tick)
        while self.probe is not None and aligned and self._next <= end + 1e-9:
            if self._next - self.model.now > 1e-9:
                self.model.advance(self._next - self.model.now)
            self.probe(self.model)
            self._next += self.every
        if end - self.model.now > 1e-9:
            self.model.advance(end - self.model.now)
        while self.probe is not None and self._next <= self.model.now + 1e-9:  # an unaligned step
            self.probe(self.model)
            self._next += self.every

    def apply(self, entry: Entry, keep: Keep, until: float | None = None) -> None:
        """One logged call: an advance (never past `until`), or a call `keep` accepts."""
        if entry.op == "advance":
            seconds = float(entry.args[0])
            if until is not None:
                seconds = min(seconds, until - self.model.now)
            if seconds > 1e-9:
                self.advance(seconds)
        elif keep(entry):
            getattr(self.model, entry.op)(*entry.args, **dict(entry.kwargs))

    def run(self, entries: Sequence[Entry], keep: Keep, until: float | None = None) -> None:
        """Replay `entries` (those `keep` accepts), then advance to `until` when given."""
        for entry in entries:
            if until is not None and entry.at >= until - 1e-9:
                break
            self.apply(entry, keep, until)
        if until is not None and until - self.model.now > 1e-9:
            self.advance(until - self.model.now)

    def fork(self, probe: Probe | None, every: float | None = None) -> Replayer:
        """An independent copy of the model so far, with its own probe."""
        twin = Replayer(copy.deepcopy(self.model), every if every is not None else self.every, probe)
        twin._next = self._next
        return twin


def _on_tick(value: float, tick: float) -> bool:
    return abs(value / tick - round(value / tick)) < 1e-9


def keep_all(_: Entry) -> bool:
    """Every call (the run as it happened)."""
    return True


def keep_untagged(entry: Entry) -> bool:
    """Only calls made outside any change: the static twin."""
    return entry.tag is None
