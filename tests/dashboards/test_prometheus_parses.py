"""Every dashboard query is accepted by a real Prometheus (empty, so this proves syntax, not data)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboards.queries import Query, all_queries
from tests.integration.processes import free_port, http_get, start_http_program, stop, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed"),
]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A Prometheus with nothing to scrape, on a free loopback port."""
    work: Path = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = free_port()
    argv = [
        "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={work / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    proc: subprocess.Popen[bytes] = start_http_program(argv, port, ready_path="/-/ready")
    try:
        wait_until(lambda: http_get(port, "/-/ready")[0] == 200, what="prometheus to be ready")
        yield port
    finally:
        stop(proc)


@pytest.mark.parametrize("query", all_queries(), ids=lambda q: f"{q.dashboard_uid}/{q.title}/{q.ref_id}")
def test_prometheus_accepts_the_query(prometheus: int, query: Query) -> None:
    promql = query.promql(rate_interval="1m")
    status, body = http_get(prometheus, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    answer = json.loads(body)
    assert status == 200 and answer["status"] == "success", f"{promql}: {answer.get('error')}"
