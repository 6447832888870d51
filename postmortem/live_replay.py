"""Rules replayed over a window of a store: what fired, or would have under these rules, and the recorded
series they compute where the store holds only raw ones (a long-term store fed by the exporters' push).

The rules' raw metrics are copied from the source into a scratch VictoriaMetrics (`replay.source`), vmalert
evaluates the rules over the window level by level (`replay.vmalert`) and the firings are read back from
`ALERTS`; with `series=True` the report's recorded series (`live.SERIES`) are read from the scratch store
too, before it is removed. Nothing is written to the source. Any failure is an `InputError` that starts
with "alerts not replayed".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from postmortem.alerts import from_firings
from postmortem.live import load_series
from postmortem.model import Alert, InputError, RunData
from postmortem.prometheus import PromQLSource
from postmortem.replay import ReplayError, RuleSet, ScratchStore
from postmortem.replay.source import copy_lines
from postmortem.replay.vmalert import replay
from postmortem.source import SeriesSource


@dataclass
class Replayed:
    """The alerts of a replay, the recorded series when asked for, and the metric names copied."""

    alerts: list[Alert]
    series: RunData | None = None
    copied: list[str] = field(default_factory=list)


def replay_window(
    source: SeriesSource, rules: RuleSet, start: float, end: float, step: float = 60.0, *, series: bool
) -> Replayed:
    """Replay `rules` over `source`'s series in [start, end] (see the module docstring)."""
    try:
        data, copied = copy_lines(source, rules, start=start, end=end, step=step)
        with ScratchStore.start() as store:
            store.import_lines(data)
            store.flush()
            result = replay(store, rules, start, end)
            recorded = None
            if series:
                recorded = RunData(source=f"{source.where}, recorded series computed by the replay")
                load_series(PromQLSource.at(store.url), start, end, step, recorded)
    except ReplayError as exc:
        raise InputError(f"alerts not replayed: {exc}") from None
    except InputError as exc:
        raise InputError(f"alerts not replayed: {exc}") from None
    return Replayed(from_firings(result.firings, rules), recorded, copied)
