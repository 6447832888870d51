"""A real Prometheus for integration tests: start it with a config and rule files, query it, stop it.

```python
with prometheus_server.running(CONFIG, rule_files=[Path("alerts/recording_rules.yml")]) as prom:
    prom.wait_for_targets(up=3)                       # every discovered target scraped successfully
    prom.wait_for_rule_evaluations(2)                 # every rule group evaluated twice
    prom.query('sum by (pool) (ibpool_pool_capacity_gpus)')   # -> [{"metric": {...}, "value": [t, "64"]}]
    prom.wait_for_query('ALERTS{alertname="X"}')      # until the result is not empty
```
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.processes import free_port, http_get, start_http_program, stop, wait_until

PROMETHEUS = shutil.which("prometheus")
Result = list[dict[str, Any]]


@dataclass
class PrometheusServer:
    """A running Prometheus: its port, working directory and process."""

    port: int
    workdir: Path
    process: subprocess.Popen[bytes]
    owns_workdir: bool = True

    @property
    def url(self) -> str:
        """Base URL, e.g. for a Grafana datasource."""
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/`path` and return its `data`; AssertionError when Prometheus reports an error."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        status, body = http_get(self.port, f"/api/v1/{path}{query}")
        answer = json.loads(body)
        if status != 200 or answer.get("status") != "success":
            raise AssertionError(
                f"prometheus /api/v1/{path} {params}: {status} {answer.get('error', body[:300])}"
            )
        return answer["data"]

    def query(self, expr: str, at: float | None = None) -> Result:
        """An instant query's result vector (or the scalar/string result as Prometheus gives it)."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        result: Result = self.api("query", **params)["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> Result:
        """A range query's result matrix."""
        data = self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step:g}")
        result: Result = data["result"]
        return result

    def values(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query as {sorted label items: value}."""
        return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in self.query(expr)}

    def targets(self) -> Result:
        """The active targets (labels, scrapeUrl, health, lastError)."""
        targets: Result = self.api("targets", state="active")["activeTargets"]
        return targets

    def rules(self) -> Result:
        """The loaded rule groups with their rules' state."""
        groups: Result = self.api("rules")["groups"]
        return groups

    def alerts(self) -> Result:
        """Pending and firing alerts."""
        alerts: Result = self.api("alerts")["alerts"]
        return alerts

    def wait_for_query(
        self, expr: str, predicate: Callable[[Result], bool] = bool, timeout: float = 60.0
    ) -> Result:
        """Query until `predicate(result)` holds (default: not empty); the last result."""
        last: list[Result] = [[]]

        def holds() -> bool:
            last[0] = self.query(expr)
            return predicate(last[0])

        wait_until(holds, timeout, f"{expr!r} to satisfy the predicate (last: {last[0]!r:.300})")
        return last[0]

    def wait_for_targets(self, up: int, timeout: float = 60.0) -> Result:
        """Until at least `up` targets exist and every one of them is healthy; the targets."""

        def healthy() -> bool:
            targets = self.targets()
            return len(targets) >= up and all(t["health"] == "up" for t in targets)

        wait_until(healthy, timeout, f"{up} healthy targets")
        return self.targets()

    def rule_group_iterations(self) -> dict[str, float]:
        """Evaluations so far per rule group (`file;group`), from Prometheus's own metrics."""
        status, body = http_get(self.port, "/metrics")
        assert status == 200
        counts: dict[str, float] = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                if sample.name == "prometheus_rule_group_iterations_total":
                    counts[sample.labels["rule_group"]] = sample.value
        return counts

    def wait_for_rule_evaluations(self, count: int, timeout: float = 60.0) -> None:
        """Until every loaded rule group (at least one) has been evaluated `count` more times than now."""
        start = self.rule_group_iterations()

        def done() -> bool:
            now = self.rule_group_iterations()
            return bool(now) and all(value - start.get(group, 0.0) >= count for group, value in now.items())

        wait_until(done, timeout, f"{count} evaluations of every rule group")

    def reload(self) -> None:
        """Re-read the config and rule files (POST /-/reload)."""
        status, body = http_get(self.port, "/-/reload", timeout=30.0, method="POST")
        assert status == 200, body

    def stop(self) -> int:
        """Stop Prometheus (SIGTERM, then SIGKILL) and remove its directory; its exit code."""
        code = stop(self.process, timeout=30.0)
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return code


def config_with_rules(config_text: str, rule_files: Sequence[Path]) -> str:
    """`config_text` with `rule_files` appended to its `rule_files` list (absolute paths)."""
    config = yaml.safe_load(config_text) or {}
    if not isinstance(config, dict):
        raise ValueError("a Prometheus config is a YAML mapping")
    if rule_files:
        config["rule_files"] = [*config.get("rule_files", []), *(str(Path(p).resolve()) for p in rule_files)]
    return yaml.safe_dump(config, sort_keys=False)


def start(
    config_text: str,
    rule_files: Sequence[Path] = (),
    workdir: Path | None = None,
    timeout: float = 60.0,
    extra_args: Sequence[str] = (),
) -> PrometheusServer:
    """Start Prometheus with this config and these rule files; wait until it is ready.

    A config that Prometheus refuses fails the start with Prometheus's own message.
    """
    if PROMETHEUS is None:
        raise AssertionError("prometheus is not installed (Debian package: prometheus)")
    owns = workdir is None
    work = Path(tempfile.mkdtemp(prefix="ibpool-prometheus-")) if workdir is None else workdir
    config = work / "prometheus.yml"
    config.write_text(config_with_rules(config_text, rule_files))
    port = free_port()
    argv = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={work / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        "--log.level=warn",
        *extra_args,
    ]
    try:
        process = start_http_program(argv, port, ready_path="/-/ready", timeout=timeout)
    except BaseException:
        if owns:
            shutil.rmtree(work, ignore_errors=True)
        raise
    server = PrometheusServer(port, work, process, owns)
    try:
        deadline = time.monotonic() + timeout
        wait_until(
            lambda: http_get(port, "/-/ready")[0] == 200, max(1.0, deadline - time.monotonic()), "ready"
        )
    except BaseException:
        server.stop()
        raise
    return server


@contextmanager
def running(config_text: str, rule_files: Sequence[Path] = (), **kwargs: Any) -> Iterator[PrometheusServer]:
    """`start`, yield the server, `stop`."""
    server = start(config_text, rule_files, **kwargs)
    try:
        yield server
    finally:
        server.stop()
