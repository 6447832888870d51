"""`ibpool recommend` on a schedule: APScheduler runs a cycle every interval; its own metrics over HTTP.

Besides the store and cycle metrics it exports `ibpool_vl_weight{table,vl,source="desired"}`: the VL
arbitration tables the last cycle's QoS reader read (absent when that cycle had no current QoS tables).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from exporter import catalog
from foundation.exposition import MetricFamily, MetricSpec
from foundation.health import HealthCheck
from foundation.http_server import MetricsHTTPServer, parse_listen_address
from foundation.registry import Registry
from foundation.routes import install_routes
from foundation.vlarb import weights_by_vl
from foundation.web_config import WebConfig
from proposals import targets
from proposals.metrics import proposal_counts
from proposals.states import PENDING
from proposals.store import Store
from recommender.cycle import CycleResult, Recommender
from recommender.signals.model import QOS, QosSignals, Signals
from recommender.signals.source import SignalSource

log = logging.getLogger(__name__)

PROPOSALS = MetricSpec("ibpool_proposals", "gauge", "Proposals in the store, by state.", ("state",))
OLDEST = MetricSpec(
    "ibpool_proposal_oldest_pending_timestamp_seconds",
    "gauge",
    "Submission time of the oldest pending proposal, by kind (absent when none is pending).",
    ("kind",),
)
DURATION = MetricSpec("ibpool_recommender_cycle_duration_seconds", "gauge", "Duration of the last cycle.")
SUCCESS = MetricSpec("ibpool_recommender_cycle_success", "gauge", "1 when the last cycle completed.")
LAST = MetricSpec("ibpool_recommender_cycle_timestamp_seconds", "gauge", "End of the last completed cycle.")
MISSING = MetricSpec(
    "ibpool_recommender_signal_missing",
    "gauge",
    "1 per signal the last cycle lacked (no proposal).",
    ("signal",),
)
SUBMITTED = MetricSpec(
    "ibpool_recommender_proposals_submitted_total",
    "counter",
    "New proposals submitted, by policy.",
    ("policy",),
)


@dataclass
class CycleStats:
    """What the metrics show about cycles."""

    last: CycleResult | None = None
    finished_at: float | None = None
    failed: bool = False
    submitted: dict[str, int] | None = None
    qos: QosSignals | None = None  # the last cycle's QoS tables, None when not read or stale


class WatchedSource:
    """A signal source that keeps the last snapshot it returned (for the desired VL weights)."""

    def __init__(self, inner: SignalSource) -> None:
        self.inner = inner
        self.name = inner.name
        self.last: Signals | None = None

    def fetch(self) -> Signals:
        """The inner source's snapshot, remembered."""
        self.last = None
        self.last = self.inner.fetch()
        return self.last

    def reset(self) -> None:
        """Forward to the inner source."""
        self.inner.reset()


def current_qos(signals: Signals | None) -> QosSignals | None:
    """The snapshot's QoS tables, or None when they were not read or are stale."""
    if signals is None or signals.lacking((QOS,)):
        return None
    return signals.qos


def desired_weights(qos: QosSignals) -> MetricFamily:
    """`ibpool_vl_weight{source="desired"}` of both tables; a table that does not parse is left out."""
    family = MetricFamily(catalog.VL_WEIGHT_DESIRED)
    for table, text in (("high", qos.vlarb_high), ("low", qos.vlarb_low)):
        try:
            entries = targets.parse_vlarb(text) if text.strip() else ()
        except ValueError as exc:
            log.warning("desired VL weights: qos_vlarb_%s %r: %s", table, text, exc)
            continue
        for vl, weight in weights_by_vl(entries).items():
            family.add((table, str(vl), "desired"), weight)
    return family


class RecommenderCollector:
    """Metric families of the store and of the last cycle (opens the store read-only per scrape)."""

    name = "recommender"

    def __init__(self, db: str, stats: CycleStats, lock: threading.Lock) -> None:
        self.db = db
        self.stats = stats
        self.lock = lock

    def collect(self) -> list[MetricFamily]:
        """Read the store and the last cycle."""
        proposals, oldest = MetricFamily(PROPOSALS), MetricFamily(OLDEST)
        with Store(self.db, create=False, read_only=True, verify=False) as store:  # checked at start
            for state, count in sorted(proposal_counts(store).items()):
                proposals.add((state,), float(count))
            first: dict[str, float] = {}
            for stored in store.list_proposals(PENDING):
                at = stored.submitted_at.timestamp()
                first[stored.proposal.kind] = min(first.get(stored.proposal.kind, at), at)
        for kind, at in sorted(first.items()):
            oldest.add((kind,), at)
        families = [proposals, oldest]
        with self.lock:
            stats = self.stats
            duration, success, last, missing = (
                MetricFamily(DURATION), MetricFamily(SUCCESS), MetricFamily(LAST), MetricFamily(MISSING)
            )  # fmt: skip
            submitted = MetricFamily(SUBMITTED)
            if stats.last is not None:
                duration.add((), stats.last.duration_seconds)
                for item in stats.last.missing:
                    missing.add((item.signal,), 1.0)
            if stats.finished_at is not None:
                last.add((), stats.finished_at)
                success.add((), 0.0 if stats.failed else 1.0)
            for policy, count in sorted((stats.submitted or {}).items()):
                submitted.add((policy,), float(count))
            weights = [desired_weights(stats.qos)] if stats.qos is not None else []
        return [*families, duration, success, last, missing, submitted, *weights]

    def close(self) -> None:
        """Nothing held between scrapes."""


class Service:
    """Runs cycles every `interval_seconds` and serves metrics until `stop` is set."""

    def __init__(
        self,
        make: Callable[[Store], Recommender],
        db: str,
        interval_seconds: float,
        listen_address: str,
        *,
        web: WebConfig | None = None,
        telemetry_path: str = "/metrics",
    ) -> None:
        self.make = make
        self.db = db
        self.interval = interval_seconds
        self.listen_address = listen_address
        self.web = web or WebConfig()
        self.telemetry_path = telemetry_path
        self.stats = CycleStats(submitted={})
        self.lock = threading.Lock()
        self._recommender: Recommender | None = None
        self._watched: WatchedSource | None = None

    def cycle(self) -> None:
        """One scheduled cycle (its own store connection: APScheduler runs it in a worker thread)."""
        with Store(self.db, verify=False) as store:  # checked once at start (serve)
            if self._recommender is None:
                self._recommender = self.make(store)
                self._watched = WatchedSource(self._recommender.source)
                self._recommender.source = self._watched
            self._recommender.store = store
            try:
                result = self._recommender.run_once()
            except Exception:  # a failed cycle shows as success 0; the next one runs as usual
                log.exception("recommendation cycle failed")
                with self.lock:
                    self.stats.failed, self.stats.finished_at, self.stats.qos = True, time.time(), None
                return
        with self.lock:
            self.stats.last, self.stats.failed, self.stats.finished_at = result, False, time.time()
            self.stats.qos = current_qos(self._watched.last if self._watched is not None else None)
            counts = self.stats.submitted if self.stats.submitted is not None else {}
            for item in result.submitted:
                if item.created:
                    counts[item.proposal.policy] = counts.get(item.proposal.policy, 0) + 1

    def serve(self, stop: threading.Event) -> int:
        """Serve metrics and run the schedule until `stop`."""
        Store(self.db).close()  # create the store before the first scrape
        registry = Registry([RecommenderCollector(self.db, self.stats, self.lock)])
        health = HealthCheck(registry, max(60.0, 2 * self.interval))
        server = MetricsHTTPServer(parse_listen_address(self.listen_address), self.web)
        install_routes(server, registry, health, self.telemetry_path)
        server.serve_in_thread()
        scheduler = BackgroundScheduler()
        scheduler.add_job(
            self.cycle,
            "interval",
            seconds=self.interval,
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )
        scheduler.start()
        log.info("recommending every %g s; metrics on %s", self.interval, self.listen_address)
        try:
            stop.wait()
        finally:
            scheduler.shutdown(wait=True)
            server.shutdown()
            server.server_close()
            registry.close()
        return 0
