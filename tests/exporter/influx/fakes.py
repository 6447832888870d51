"""Test doubles for the push: a deterministic collector and a scriptable writer."""

from __future__ import annotations

import threading
from collections import Counter

from exporter.influx.writer import WriteResult
from foundation.exposition import MetricFamily, MetricSpec

GAUGE = MetricSpec("ibpool_test_push_ratio", "gauge", "A test gauge.", ("device", "port"))
COUNTER = MetricSpec("ibpool_test_push_events_total", "counter", "A test counter.", ("kind",))


class SyntheticCollector:
    """`ports` gauge series (tricky label values included) and two counters; values follow the call count."""

    name = "synthetic"

    def __init__(self, ports: int = 4) -> None:
        self.ports = ports
        self.calls = 0

    @property
    def series(self) -> int:
        """Series per collection."""
        return self.ports + 2

    def collect(self) -> list[MetricFamily]:
        """One collection; the n-th (from 0) has gauge value n + port / 10."""
        n = self.calls
        self.calls += 1
        gauge = MetricFamily(GAUGE)
        for port in range(self.ports):
            gauge.add((f"mlx5 {port},a=b", str(port)), n + port / 10)
        counter = MetricFamily(COUNTER)
        counter.add(("xid",), n)
        counter.add(("ecc corrected",), 2 * n)
        return [gauge, counter]

    def close(self) -> None:
        """Nothing to release."""


class FakeWriter:
    """Keeps the lines it accepts. `down` refuses every write; `ambiguous` writes are kept but reported
    failed (the answer was lost); `outcomes` scripts the next results."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.down = False
        self.ambiguous = 0
        self.outcomes: list[WriteResult] = []
        self.attempts = 0
        self._lock = threading.Lock()

    def write(self, payload: bytes) -> WriteResult:
        """Accept, refuse or script."""
        with self._lock:
            self.attempts += 1
            if self.outcomes:
                return self.outcomes.pop(0)
            if self.down:
                return WriteResult("retry", None, None, "connection refused")
            self.lines.extend(payload.splitlines())
            if self.ambiguous:
                self.ambiguous -= 1
                return WriteResult("retry", None, None, "read timed out")
            return WriteResult("ok", 204)

    def close(self) -> None:
        """Nothing to release."""

    def counts(self) -> Counter[bytes]:
        """How often each line arrived."""
        with self._lock:
            return Counter(self.lines)
