"""PrometheusSource: the signals from Prometheus's HTTP API, reusing the recording rules (5m rate window)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from recommender.signals import queries as q
from recommender.signals.fetch import http_get
from recommender.signals.model import LINKS, NODES, POOLS, Signals
from recommender.signals.qos import QosReader, snapshot
from recommender.signals.raw import LinkInfo, PortReading, RawData, add_route

WINDOW_SECONDS = 300.0  # the recording rules' rate window
Vector = list[tuple[dict[str, str], float]]


class QueryError(Exception):
    """Prometheus refused or failed a query."""


@dataclass(frozen=True)
class PrometheusSettings:
    """Where Prometheus answers."""

    url: str
    max_age_seconds: float = 120.0
    timeout_seconds: float = 10.0


class PrometheusSource:
    """Signals from instant queries at one evaluation time."""

    name = "prometheus"

    def __init__(
        self, settings: PrometheusSettings, qos: QosReader | None, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.qos = qos
        self._clock = clock

    def reset(self) -> None:
        """Nothing to forget: Prometheus keeps the history."""

    def query(self, expr: str, at: float) -> Vector:
        """One instant query as (labels, value) pairs."""
        url = (
            f"{self.settings.url.rstrip('/')}/api/v1/query?{urlencode({'query': expr, 'time': f'{at:.3f}'})}"
        )
        try:
            answer: dict[str, Any] = json.loads(http_get(url, self.settings.timeout_seconds))
        except (OSError, ValueError) as exc:
            raise QueryError(f"{expr}: {exc}") from None
        if answer.get("status") != "success":
            raise QueryError(f"{expr}: {answer.get('error', 'failed')}")
        return [(s["metric"], float(s["value"][1])) for s in answer["data"]["result"]]

    def fetch(self) -> Signals:
        """Run every query at one time and assemble the signals."""
        now = self._clock()
        raw = RawData()
        for group, reader in ((POOLS, self._pools), (NODES, self._nodes), (LINKS, self._links)):
            try:
                reader(raw, now)
            except QueryError as exc:
                raw.errors[group] = str(exc)
        return snapshot(
            raw,
            self.qos,
            taken_at=now,
            window_seconds=WINDOW_SECONDS,
            source=self.name,
            max_age_seconds=self.settings.max_age_seconds,
        )

    def _age(self, expr: str, at: float) -> float | None:
        result = self.query(expr, at)
        return max(0.0, result[0][1]) if result else None

    def _pools(self, raw: RawData, at: float) -> None:
        raw.pool_capacity = {m["pool"]: v for m, v in self.query(q.POOL_CAPACITY, at)}
        raw.pool_allocated = {m["pool"]: v for m, v in self.query(q.POOL_ALLOCATED, at)}
        raw.pool_pending = {m["pool"]: v for m, v in self.query(q.POOL_PENDING, at)}
        raw.pool_utilization = {m["pool"]: v for m, v in self.query(q.POOL_UTILIZATION, at)}
        for m, _ in self.query(q.POOL_NODES, at):
            raw.pool_nodes.setdefault(m["pool"], set()).add(m["node"])
        raw.node_state = {m["node"]: m["state"] for m, _ in self.query(q.NODE_STATE, at)}
        raw.ages[POOLS] = self._age(q.SCHEDULER_AGE, at)
        if raw.ages[POOLS] is None:
            raw.errors[POOLS] = "no successful scheduler poll in Prometheus"

    def _nodes(self, raw: RawData, at: float) -> None:
        raw.node_utilization = {m["node"]: v for m, v in self.query(q.NODE_UTILIZATION, at)}
        raw.ages[NODES] = self._age(q.NODE_AGE, at)

    def _links(self, raw: RawData, at: float) -> None:
        def by(expr: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
            return {tuple(m.get(k, "") for k in labels): v for m, v in self.query(expr, at)}

        hca = ("node", "device", "port")
        rates, cong = by(q.HCA_RATE, hca), by(q.HCA_CONGESTION, hca)
        util, sat = by(q.HCA_UTILIZATION, hca), by(q.HCA_SATURATED, hca)
        for key, rate in sorted(rates.items()):
            if rate > 0:
                raw.ports.append(
                    PortReading(
                        "hca",
                        key[0],
                        key[1],
                        key[2],
                        cong.get(key),
                        util.get(key),
                        sat.get(key) == 1,
                        {},
                        rate,
                    )
                )
        fab = ("node_guid", "port", "node_desc")
        rates, cong = by(q.FABRIC_RATE, fab), by(q.FABRIC_CONGESTION, fab)
        util, sat = by(q.FABRIC_UTILIZATION, fab), by(q.FABRIC_SATURATED, fab)
        vls: dict[tuple[str, ...], dict[int, float]] = {}
        for m, v in self.query(q.FABRIC_VL_CONGESTION, at):
            vls.setdefault((m["node_guid"], m["port"], m["node_desc"]), {})[int(m["vl"])] = v
        for key, rate in sorted(rates.items()):
            if rate > 0:
                raw.ports.append(
                    PortReading(
                        "fabric", key[0], key[2], key[1], cong.get(key), util.get(key), sat.get(key) == 1,
                        vls.get(key, {}), rate,
                    )
                )  # fmt: skip
        raw.links = [
            LinkInfo(
                m["node_guid"],
                m["port"],
                m["node_desc"],
                m["remote_guid"],
                m["remote_port"],
                m["remote_desc"],
            )
            for m, _ in self.query(q.FABRIC_LINKS, at)
        ]
        raw.switches = {m["node_guid"] for m, _ in self.query(q.SWITCHES, at)}
        for m, _ in self.query(q.FABRIC_ROUTES, at):
            if not add_route(raw.routes, m["node_guid"], m["port"], m.get("destinations", "")):
                raw.routes.clear()  # one unreadable host list: the cabling decides, as without routes
                break
        raw.ages[LINKS] = self._age(q.FABRIC_AGE, at)
        if raw.ages[LINKS] is None:
            raw.errors[LINKS] = "no fabric sweep in Prometheus"
