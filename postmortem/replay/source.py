"""Series for a replay read from any Prometheus HTTP API (Prometheus, VictoriaMetrics, ...) over a window.

Only the metrics the rules mention are copied (the names in their expressions that the source knows),
each with `query_range` at the evaluation interval from `lookback` before the window (the rules look up
to a day back: `max_over_time(...[1d])`) to its end. The copy goes into a scratch store, never back into
the source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from postmortem.replay.errors import ReplayError
from postmortem.replay.rules import RuleSet
from postmortem.replay.store import gzip_lines

Fetch = Callable[[str, Mapping[str, str]], Any]
DEFAULT_LOOKBACK_SECONDS = 86400.0


def _data(answer: Any, what: str) -> Any:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error", answer) if isinstance(answer, dict) else answer
        raise ReplayError(f"{what}: {error}")
    return answer.get("data")


def copy_lines(
    fetch: Fetch,
    rules: RuleSet,
    *,
    start: float,
    end: float,
    step: float = 60.0,
    lookback: float = DEFAULT_LOOKBACK_SECONDS,
) -> tuple[bytes, list[str]]:
    """The rules' metrics over [start - lookback, end] as gzip JSON lines, and the names copied."""
    known = set(_data(fetch("/api/v1/label/__name__/values", {}), "metric names") or [])
    names = sorted(rules.metric_names() & known)
    series: list[dict[str, Any]] = []
    for name in names:
        params = {
            "query": name,
            "start": f"{start - lookback:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step:g}s",
        }
        for item in _data(fetch("/api/v1/query_range", params), f"query_range {name}").get("result", []):
            values = [(float(at), float(v)) for at, v in item.get("values", [])]
            if not values:
                continue
            metric = {str(k): str(v) for k, v in item.get("metric", {}).items()}
            metric.setdefault("__name__", name)
            series.append(
                {
                    "metric": metric,
                    "timestamps": [round(at * 1000) for at, _ in values],
                    "values": [v for _, v in values],
                }
            )
    return gzip_lines(series), names
