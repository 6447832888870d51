"""EmbeddedSource: scrape the exporters in-process and compute what the recording rules compute.

Targets come from an http_sd JSON document (`/targets` of the simulated cluster server, or any file_sd-style
URL): one node exporter per group, its `node` label naming the node. The fabric and scheduler exporters are
given by URL. Rates are taken between this scrape and the previous one (the first fetch scrapes twice,
`window_seconds` apart), with the rules' formulas: congestion = rate(wait ticks) * tick bytes / link rate,
utilization = rate(bytes sent) / link rate; a saturated 32-bit wait counter gives no congestion.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from recommender.signals import scrape as sc
from recommender.signals.fetch import http_get
from recommender.signals.model import LINKS, NODES, POOLS, Signals
from recommender.signals.qos import QosReader, snapshot
from recommender.signals.raw import PortReading, RawData


@dataclass(frozen=True)
class EmbeddedSettings:
    """Where the exporters answer and how to read them."""

    targets_url: str
    fabric_url: str | None = None  # default: /fabric/metrics on the targets host
    scheduler_url: str | None = None  # default: /scheduler/metrics on the targets host
    window_seconds: float = 5.0
    max_age_seconds: float = 120.0
    timeout_seconds: float = 10.0
    wait_tick_bytes: float = 256.0
    workers: int = 16


def _on_host(url: str, path: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{path}"


class EmbeddedSource:
    """Signals from an in-process scrape; keeps the previous scrape for rates."""

    name = "embedded"

    def __init__(
        self,
        settings: EmbeddedSettings,
        qos: QosReader | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.fabric_url = settings.fabric_url or _on_host(settings.targets_url, "/fabric/metrics")
        self.scheduler_url = settings.scheduler_url or _on_host(settings.targets_url, "/scheduler/metrics")
        self.qos = qos
        self._clock = clock
        self._sleep = sleep
        self._previous: sc.Scrape | None = None

    def reset(self) -> None:
        """Drop the previous scrape."""
        self._previous = None

    def fetch(self) -> Signals:
        """Scrape (twice on the first call) and assemble the signals."""
        if self._previous is None:
            self._previous = self._scrape_all()
            self._sleep(self.settings.window_seconds)
        previous, current = self._previous, self._scrape_all()
        self._previous = current
        now = self._clock()
        return snapshot(
            self._raw(previous, current, now),
            self.qos,
            taken_at=now,
            window_seconds=_window(previous, current),
            source=self.name,
            max_age_seconds=self.settings.max_age_seconds,
        )

    # --- scraping -----------------------------------------------------------------------------------

    def _get(self, url: str) -> str:
        return http_get(url, self.settings.timeout_seconds)

    def _targets(self) -> list[tuple[str, str]]:
        """(node, URL) of every node exporter in the service-discovery document."""
        groups = json.loads(self._get(self.settings.targets_url))
        out: list[tuple[str, str]] = []
        for group in groups:
            labels = group.get("labels", {})
            path = labels.get("__metrics_path__", "/metrics")
            for target in group.get("targets", []):
                node = labels.get("node") or target
                out.append((node, urljoin(f"http://{target}", path)))
        return out

    def _scrape_all(self) -> sc.Scrape:
        scrape = sc.Scrape()
        try:
            sc.add_scheduler(scrape, self._get(self.scheduler_url))
        except (OSError, ValueError) as exc:
            scrape.node_errors["__scheduler__"] = f"{self.scheduler_url}: {exc}"
        try:
            sent = self._clock()
            fabric = self._get(self.fabric_url)
            sc.add_fabric(scrape, fabric, (sent + self._clock()) / 2.0)
        except (OSError, ValueError) as exc:
            scrape.node_errors["__fabric__"] = f"{self.fabric_url}: {exc}"
        try:
            targets = self._targets()
        except (OSError, ValueError, AttributeError) as exc:
            scrape.node_errors["__targets__"] = f"{self.settings.targets_url}: {exc}"
            targets = []

        def one(item: tuple[str, str]) -> tuple[str, str | None, str, float]:
            node, url = item
            sent = self._clock()
            try:
                text = self._get(url)
            except OSError as exc:
                return node, None, f"{url}: {exc}", sent
            # Counters are read while the exporter answers: stamp them halfway through the request, not
            # when every target has answered (that lag differs between scrapes and skews the rates).
            return node, text, "", (sent + self._clock()) / 2.0

        with ThreadPoolExecutor(max_workers=max(1, self.settings.workers)) as pool:
            answers = list(pool.map(one, targets))
        for node, body, error, at in answers:
            if body is None:
                scrape.node_errors[node] = error
                continue
            try:
                sc.add_node(scrape, node, body, at)
            except ValueError as exc:
                scrape.node_errors[node] = f"{node}: cannot parse: {exc}"
        return scrape

    # --- derivation ---------------------------------------------------------------------------------

    def _raw(self, previous: sc.Scrape, current: sc.Scrape, now: float) -> RawData:
        raw = RawData()
        errors = current.node_errors
        if "__scheduler__" in errors:
            raw.errors[POOLS] = errors["__scheduler__"]
        elif not current.scheduler_up or current.poll_timestamp is None:
            raw.errors[POOLS] = "the scheduler exporter reports no successful poll"
        else:
            raw.ages[POOLS] = max(0.0, now - current.poll_timestamp)
        for pool, gauges in current.pool_gauges.items():
            raw.pool_capacity[pool] = gauges.get("capacity", 0.0)
            raw.pool_allocated[pool] = gauges.get("allocated", 0.0)
            raw.pool_pending[pool] = gauges.get("pending", 0.0)
        raw.pool_nodes = {p: set(n) for p, n in current.pool_nodes.items()}
        raw.node_state = dict(current.node_state)
        for node, values in current.gpu_util.items():
            if values:
                raw.node_utilization[node] = sum(values) / len(values)
        for pool, members in raw.pool_nodes.items():
            total = sum(sum(current.gpu_util.get(n, [])) for n in members)
            count = sum(len(current.gpu_util.get(n, [])) for n in members)
            if count:
                raw.pool_utilization[pool] = total / count
        if "__targets__" in errors:
            raw.errors[NODES] = errors["__targets__"]
        else:
            raw.ages[NODES] = 0.0
        if "__fabric__" in errors:
            raw.errors[LINKS] = errors["__fabric__"]
        elif current.sweep_timestamp is None:
            raw.errors[LINKS] = "the fabric exporter reports no complete sweep"
        else:
            raw.ages[LINKS] = max(0.0, now - current.sweep_timestamp)
        if _window(previous, current) <= 0:
            raw.errors[LINKS] = "no previous scrape: rates need two scrapes over the window"
        raw.links, raw.switches = list(current.links), set(current.switches)
        raw.routes = {} if current.routes_unreadable else dict(current.routes)
        raw.ports = self._ports(previous, current)
        return raw

    def _rate(self, previous: sc.Scrape, current: sc.Scrape, key: sc.Key) -> float | None:
        before, after = previous.counters.get(key), current.counters.get(key)
        if before is None or after is None or after[1] <= before[1] or after[0] < before[0]:
            return None
        return (after[0] - before[0]) / (after[1] - before[1])

    def _ports(self, previous: sc.Scrape, current: sc.Scrape) -> list[PortReading]:
        tick = self.settings.wait_tick_bytes
        vl_keys: dict[sc.Key, list[sc.Key]] = {}
        for key in current.counters:
            if len(key) >= 2 and key[-2] == "vl":
                vl_keys.setdefault(key[:-2], []).append(key)
        out: list[PortReading] = []
        for port, link_rate in sorted(current.rates.items()):
            if link_rate <= 0:
                continue
            saturated = (*port, "wait") in current.saturated
            wait = None if saturated else self._rate(previous, current, (*port, "wait"))
            data = (
                None
                if (*port, "data") in current.saturated
                else self._rate(previous, current, (*port, "data"))
            )
            vls: dict[int, float] = {}
            for key in vl_keys.get(port, []):
                vl_rate = None if key in current.saturated else self._rate(previous, current, key)
                if vl_rate is not None:
                    vls[int(key[-1])] = vl_rate * tick / link_rate
            kind, owner = port[0], port[1]
            device = port[2] if kind == "hca" else current.descs.get(owner, "")
            out.append(
                PortReading(
                    kind=kind,
                    owner=owner,
                    device=device,
                    port=port[-1],
                    congestion=None if wait is None else wait * tick / link_rate,
                    utilization=None if data is None else data / link_rate,
                    saturated=saturated,
                    vl_congestion=vls,
                    rate_bytes_per_second=link_rate,
                )
            )
        return out


def _window(previous: sc.Scrape, current: sc.Scrape) -> float:
    times_before = [t for _, t in previous.counters.values()]
    times_after = [t for _, t in current.counters.values()]
    if not times_before or not times_after:
        return 0.0
    return min(times_after) - min(times_before)
