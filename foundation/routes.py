"""Wires a registry and a health check to HTTP routes.

The metrics route adds the process's own metrics (foundation/process_metrics.py) to every exporter's, and
times each answer (collect and render) for `ibpool_exporter_scrape_duration_seconds_total`.
"""

from __future__ import annotations

import time

from foundation.exposition import CONTENT_TYPE, render
from foundation.health import HealthCheck
from foundation.http_server import MetricsHTTPServer, Request, Response
from foundation.process_metrics import ProcessCollector, ScrapeStats
from foundation.registry import Registry

_LANDING = """<!doctype html><html><head><title>ibpool exporter</title></head><body>
<h1>ibpool exporter</h1><p><a href="{path}">Metrics</a> &middot; <a href="/healthz">Health</a></p>
</body></html>
"""


def install_routes(
    server: MetricsHTTPServer, registry: Registry, health: HealthCheck, telemetry_path: str = "/metrics"
) -> None:
    """Serve metrics at `telemetry_path` (with the process's own), health at /healthz and a landing page.

    Also starts a first collection in the background, so that /healthz soon has one to judge.
    """
    process = ProcessCollector()
    scrapes = ScrapeStats()

    def metrics(_: Request) -> Response:
        start = time.perf_counter()
        families = registry.collect()
        families.extend(process.collect())
        families.extend(scrapes.families())
        body = render(families).encode()
        scrapes.observe(time.perf_counter() - start)
        return Response(200, body, CONTENT_TYPE)

    def healthz(_: Request) -> Response:
        report = health.check()
        return Response(200 if report.healthy else 503, report.to_json(), "application/json")

    def landing(_: Request) -> Response:
        return Response(200, _LANDING.format(path=telemetry_path).encode(), "text/html; charset=utf-8")

    server.route("GET", telemetry_path, metrics)
    server.route("GET", "/healthz", healthz)
    server.route("GET", "/", landing)
    registry.refresh()
