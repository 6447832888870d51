"""Source: any PromQL HTTP API (Prometheus, VictoriaMetrics, Thanos, Mimir), as a `SeriesSource`.

A selector becomes one `query_range` (`/api/v1/query_range`, its PromQL text); the names come from
`/api/v1/label/__name__/values` bounded by the window (VictoriaMetrics answers only the last day without
bounds). The HTTP side goes through a `Fetch` (path and query parameters -> decoded JSON), so unit tests
answer with a fake; `http_fetch` is the real one.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from postmortem.model import InputError
from postmortem.source import Selector, Series

Fetch = Callable[[str, Mapping[str, str]], Any]


def http_fetch(base_url: str, timeout_s: float = 30.0) -> Fetch:
    """A Fetch that GETs `base_url + path` and decodes the JSON answer."""

    def fetch(path: str, params: Mapping[str, str]) -> Any:
        url = base_url.rstrip("/") + path + "?" + urllib.parse.urlencode(sorted(params.items()))
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")[:300]
            raise InputError(f"PromQL API at {base_url}: HTTP {exc.code}: {body}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InputError(f"cannot query the PromQL API at {base_url}: {exc}") from None

    return fetch


def _data(answer: Any, what: str) -> Any:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error", answer) if isinstance(answer, dict) else answer
        raise InputError(f"{what} failed: {error}")
    return answer.get("data")


class PromQLSource:
    """Series from a PromQL HTTP API."""

    def __init__(self, fetch: Fetch, where: str = "a PromQL API") -> None:
        self.fetch = fetch
        self._where = where

    @classmethod
    def at(cls, base_url: str) -> PromQLSource:
        """The source at `base_url`, over HTTP."""
        return cls(http_fetch(base_url), f"the PromQL API at {base_url}")

    @property
    def where(self) -> str:
        """The store, for the report."""
        return self._where

    def names(self, start: float, end: float) -> set[str]:
        """Metric names with samples in [start, end]."""
        params = {"start": f"{start:.3f}", "end": f"{end:.3f}"}
        found = _data(self.fetch("/api/v1/label/__name__/values", params), "metric names")
        return {str(n) for n in found or []}

    def select(self, selector: Selector, start: float, end: float, step: float) -> Series:
        """One `query_range`: (labels, points) per series, NaN samples left out."""
        query = selector.promql()
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}s"}
        data = _data(self.fetch("/api/v1/query_range", params), f"query {query!r}") or {}
        result: Series = []
        for item in data.get("result", []):
            points = []
            for at, value in item.get("values", []):
                number = float(value)
                if not math.isnan(number):
                    points.append((float(at), number))
            labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
            labels.setdefault("__name__", selector.name)
            result.append((labels, sorted(points)))
        return result
