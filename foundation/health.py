"""/healthz: healthy only while collection is fresh and every collector succeeds."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from foundation.registry import Registry


@dataclass(frozen=True)
class HealthReport:
    """The verdict and the facts behind it."""

    healthy: bool
    reasons: tuple[str, ...]
    detail: dict[str, object]

    def to_json(self) -> bytes:
        """The report as the /healthz body."""
        body = {"status": "ok" if self.healthy else "unhealthy", "reasons": list(self.reasons), **self.detail}
        return (json.dumps(body, sort_keys=True) + "\n").encode()


class HealthCheck:
    """Judges the registry's last collection; collects again first if that is older than `max_age`.

    `extra_checks` return a reason string when something outside the collectors is broken (for example
    the XID event thread died), or None when all is well.
    """

    def __init__(
        self,
        registry: Registry,
        max_age_seconds: float,
        extra_checks: list[Callable[[], str | None]] | None = None,
    ) -> None:
        self._registry = registry
        self._max_age = max_age_seconds
        self._extra = list(extra_checks or [])

    def check(self) -> HealthReport:
        """Collect if stale, then report which collectors fail and why."""
        age = self._registry.last_collection_age()
        if age is None or age > self._max_age:
            self._registry.collect()
            age = self._registry.last_collection_age()
        reasons: list[str] = []
        collectors: dict[str, object] = {}
        for name, status in self._registry.status().items():
            collectors[name] = {
                "success": status.success,
                "duration_seconds": round(status.duration_seconds, 6),
                "error": status.error,
            }
            if not status.success:
                reasons.append(f"collector {name} failing: {status.error}")
        for extra in self._extra:
            reason = extra()
            if reason:
                reasons.append(reason)
        detail: dict[str, object] = {"collectors": collectors, "last_collection_age_seconds": age}
        return HealthReport(not reasons, tuple(reasons), detail)
