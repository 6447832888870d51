"""Process self metrics and the scrape timing at the metrics route, over a real socket."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation.exposition import render
from foundation.health import HealthCheck
from foundation.http_server import MetricsHTTPServer
from foundation.process_metrics import ProcessCollector, ScrapeStats
from foundation.registry import Registry
from foundation.routes import install_routes
from tests.helpers import samples_of


def _value(text: str, name: str) -> float:
    return samples_of(text, name)[()]


def _vm_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_process_figures_are_this_process_s() -> None:
    collector = ProcessCollector()
    text = render(collector.collect())
    rss = _value(text, "process_resident_memory_bytes")
    assert 0.5 * _vm_rss() < rss < 2 * _vm_rss()
    assert _value(text, "process_start_time_seconds") <= time.time()
    assert _value(text, "process_start_time_seconds") > time.time() - 24 * 3600
    fds = _value(text, "process_open_fds")
    with open(__file__) as f, open(__file__) as g:
        assert f and g
        more = render(collector.collect())
        assert _value(more, "process_open_fds") == fds + 2
    cpu = _value(text, "process_cpu_seconds_total")
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # burn some CPU
        pass
    assert _value(render(collector.collect()), "process_cpu_seconds_total") > cpu
    assert _value(text, "process_max_fds") > 0


def test_without_proc_only_what_can_be_known(tmp_path: Path) -> None:
    text = render(ProcessCollector(proc=tmp_path).collect())
    assert _value(text, "process_cpu_seconds_total") > 0
    assert "process_resident_memory_bytes" not in text and "process_open_fds" not in text
    assert _value(text, "process_start_time_seconds") <= time.time()


def test_scrape_stats_report_the_scrapes_before() -> None:
    stats = ScrapeStats()
    text = render(stats.families())
    assert _value(text, "ibpool_exporter_scrapes_total") == 0
    assert "ibpool_exporter_last_scrape_duration_seconds" not in text
    stats.observe(0.25)
    stats.observe(0.5)
    text = render(stats.families())
    assert _value(text, "ibpool_exporter_scrapes_total") == 2
    assert _value(text, "ibpool_exporter_scrape_duration_seconds_total") == 0.75
    assert _value(text, "ibpool_exporter_last_scrape_duration_seconds") == 0.5


@pytest.fixture
def served() -> Iterator[int]:
    registry = Registry([])
    server = MetricsHTTPServer(("127.0.0.1", 0))
    install_routes(server, registry, HealthCheck(registry, 60.0))
    server.serve_in_thread()
    yield server.port
    server.shutdown()
    server.server_close()


def test_every_exporter_route_serves_process_and_scrape_metrics(served: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served, timeout=5)
    texts = []
    for _ in range(3):
        conn.request("GET", "/metrics")
        texts.append(conn.getresponse().read().decode())
    assert _value(texts[0], "ibpool_exporter_scrapes_total") == 0
    assert _value(texts[2], "ibpool_exporter_scrapes_total") == 2
    assert _value(texts[2], "ibpool_exporter_scrape_duration_seconds_total") >= _value(
        texts[2], "ibpool_exporter_last_scrape_duration_seconds"
    )
    assert _value(texts[2], "ibpool_exporter_last_scrape_duration_seconds") > 0
    assert _value(texts[2], "process_resident_memory_bytes") > 0
    assert _value(texts[2], "process_open_fds") >= 3
    assert _value(texts[2], "process_start_time_seconds") > 0
