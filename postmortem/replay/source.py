"""Series for a replay, copied from any store a report reads (`postmortem.source.SeriesSource`) over a window.

Only the raw metrics the rules read are copied: the names in their expressions that the store holds in
the window, less what the rules record themselves and `ALERTS`/`ALERTS_FOR_STATE` (the replay computes
those again, from the rules as they are now; a copy of the old results would mix with the new ones).
Each is sampled at the evaluation interval from `lookback` before the window (the rules look up to a day
back: `max_over_time(...[1d])`) to its end. The copy goes into a scratch store, never back into the source.
"""

from __future__ import annotations

from typing import Any

from postmortem.model import InputError
from postmortem.replay.errors import ReplayError
from postmortem.replay.rules import RuleSet
from postmortem.replay.store import gzip_lines
from postmortem.source import Selector, SeriesSource

DEFAULT_LOOKBACK_SECONDS = 86400.0
RULE_ENGINE_SERIES = frozenset({"ALERTS", "ALERTS_FOR_STATE"})


def copy_lines(
    source: SeriesSource,
    rules: RuleSet,
    *,
    start: float,
    end: float,
    step: float = 60.0,
    lookback: float = DEFAULT_LOOKBACK_SECONDS,
) -> tuple[bytes, list[str]]:
    """The rules' raw metrics over [start - lookback, end] as gzip JSON lines, and the names copied
    (ReplayError when the source cannot be read)."""
    recorded = {r.name for r in rules.rules if not r.is_alert} | RULE_ENGINE_SERIES
    try:
        known = source.names(start - lookback, end)
        names = sorted((rules.metric_names() & known) - recorded)
        series: list[dict[str, Any]] = []
        for name in names:
            for labels, points in source.select(Selector(name), start - lookback, end, step):
                if points:
                    series.append(
                        {
                            "metric": {**labels, "__name__": name},
                            "timestamps": [round(at * 1000) for at, _ in points],
                            "values": [v for _, v in points],
                        }
                    )
    except InputError as exc:
        raise ReplayError(f"copying the rules' series from {source.where}: {exc}") from None
    return gzip_lines(series), names
