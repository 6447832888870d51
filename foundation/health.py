"""/healthz: judges the registry's last completed collection and what is running now, without waiting.

Rules: a check never runs or waits on a collector. When the last collection is older than `max_age`, it
starts one in the background and still answers from what it has. Unhealthy (503): no collection has
completed yet, a collector's last run failed, a collector's call or the whole collection has run past
its deadline, or an extra check reports a problem.
"""

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
    """Reports on the registry's state; asks it for a background collection when its data is stale.

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
        """Which collectors fail or hang, and why; returns at once whatever the collectors do."""
        state = self._registry.state()
        age = state.last_collection_age
        if age is None or age > self._max_age:
            self._registry.refresh()
        reasons: list[str] = []
        if age is None:
            reasons.append("no collection has completed yet")
        collectors: dict[str, object] = {}
        for name, status in state.statuses.items():
            collectors[name] = {
                "success": status.success,
                "duration_seconds": round(status.duration_seconds, 6),
                "error": status.error,
            }
            if not status.success:
                reasons.append(f"collector {name} failing: {status.error}")
        for name, (busy, deadline) in state.stuck.items():
            reasons.append(f"collector {name} stuck: a call has run {busy:.1f} s (deadline {deadline:g} s)")
        running = state.collecting_for
        if running is not None and running > state.collection_deadline:
            limit = state.collection_deadline
            reasons.append(f"collection stuck: running for {running:.1f} s (deadline {limit:g} s)")
        for extra in self._extra:
            reason = extra()
            if reason:
                reasons.append(reason)
        detail: dict[str, object] = {
            "collectors": collectors,
            "last_collection_age_seconds": age,
            "collection_running_seconds": running,
        }
        return HealthReport(not reasons, tuple(reasons), detail)
