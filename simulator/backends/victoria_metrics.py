"""A real VictoriaMetrics for integration tests: InfluxDB line protocol in, PromQL and raw export out.

```python
with victoria_metrics.running(dedup=True) as vm:   # a free loopback port, kept across restarts
    vm.url                                         # http://127.0.0.1:PORT, for influxdb-client
    vm.stop(); vm.start(); vm.flush()              # a restart (same storage); searchable now
    vm.query("count_over_time(m[1h])", at=t)       # PromQL instant query -> result vector
    vm.samples('{__name__=~"ibpool_.*"}')          # raw samples per series, via /api/v1/export
```
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.backends.processes import free_port, http_get, start_http_program, stop

VICTORIA_METRICS = shutil.which("victoria-metrics")
# The long-term store's own flags as compose.yaml runs it (tests/dashboards checks they agree). Without
# -retentionPeriod VictoriaMetrics keeps one month and drops older samples on write while still answering
# 204, so an incident pushed (or replayed from a spill) 60 days late would be lost.
LONG_TERM_ARGS = ("-retentionPeriod=400d",)
Labels = tuple[tuple[str, str], ...]
Samples = dict[Labels, list[tuple[int, float]]]  # series -> [(timestamp ms, value)], in time order


@dataclass
class VictoriaMetrics:
    """One VictoriaMetrics server; `start` and `stop` may be called again (same port, same storage)."""

    storage: Path
    dedup: bool = True
    extra_args: Sequence[str] = ()
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    owns_storage: bool = False

    @property
    def url(self) -> str:
        """Base URL (the InfluxDB v2 write API is at /api/v2/write)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the process lives."""
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait for /health."""
        if VICTORIA_METRICS is None:
            raise AssertionError("victoria-metrics is not installed (Debian package: victoria-metrics)")
        argv = [
            VICTORIA_METRICS,
            f"-httpListenAddr=127.0.0.1:{self.port}",
            f"-storageDataPath={self.storage}",
            "-influxSkipSingleField",  # measurement `m` with one field `value` is metric `m`, not `m_value`
            "-search.latencyOffset=0s",  # recent samples are visible at once
            "-loggerLevel=ERROR",
            # Without it VictoriaMetrics keeps both copies of a sample written twice (same series, timestamp).
            *(["-dedup.minScrapeInterval=1ms"] if self.dedup else []),
            *self.extra_args,
        ]
        self.process = start_http_program(argv, self.port, ready_path="/health", timeout=timeout)

    def stop(self) -> int:
        """SIGTERM (VictoriaMetrics flushes its buffers to disk), wait; the exit code."""
        if self.process is None:
            return 0
        code = stop(self.process, timeout=30.0)
        self.process = None
        return code

    def kill(self) -> None:
        """SIGKILL: what VictoriaMetrics had not flushed yet is lost."""
        if self.process is not None:
            self.process.kill()
            stop(self.process)
            self.process = None

    def flush(self) -> None:
        """Make recently written samples searchable (/internal/force_flush)."""
        status, body = http_get(self.port, "/internal/force_flush")
        assert status == 200, body

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/`path` and return its `data`."""
        status, body = http_get(self.port, f"/api/v1/{path}?{urllib.parse.urlencode(params)}")
        answer = json.loads(body)
        if status != 200 or answer.get("status") != "success":
            raise AssertionError(f"victoria-metrics /api/v1/{path} {params}: {status} {body[:300]!r}")
        return answer["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant PromQL query's result vector."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        result: list[dict[str, Any]] = self.api("query", **params)["result"]
        return result

    def export(self, match: str) -> list[dict[str, Any]]:
        """Raw samples of the matching series (/api/v1/export): one object per series, up to a day ahead.

        `end` is given: by default the export stops at the current whole second, hiding the newest samples.
        """
        params = {"match[]": match, "end": f"{time.time() + 86400:.3f}"}
        status, body = http_get(self.port, f"/api/v1/export?{urllib.parse.urlencode(params)}")
        assert status == 200, body[:300]
        return [json.loads(line) for line in body.decode().splitlines() if line.strip()]

    def samples(self, match: str) -> Samples:
        """Raw samples per series (sorted label items, `__name__` included), in time order."""
        out: Samples = {}
        for series in self.export(match):
            key = tuple(sorted(series["metric"].items()))
            points = sorted(zip(series["timestamps"], series["values"], strict=True))
            out.setdefault(key, []).extend((int(t), float(v)) for t, v in points)
        for points in out.values():
            points.sort()
        return out

    def close(self) -> None:
        """Stop the server and remove its storage when it made it."""
        self.stop()
        if self.owns_storage:
            shutil.rmtree(self.storage, ignore_errors=True)


def start(storage: Path | None = None, dedup: bool = True, extra_args: Sequence[str] = ()) -> VictoriaMetrics:
    """A started server; storage in a new temporary directory unless given."""
    owns = storage is None
    path = Path(tempfile.mkdtemp(prefix="ibpool-vm-")) if storage is None else storage
    server = VictoriaMetrics(path, dedup, extra_args, owns_storage=owns)
    try:
        server.start()
    except BaseException:
        server.close()
        raise
    return server


@contextmanager
def running(
    storage: Path | None = None, dedup: bool = True, extra_args: Sequence[str] = ()
) -> Iterator[VictoriaMetrics]:
    """`start`, yield the server, `close`."""
    server = start(storage, dedup, extra_args)
    try:
        yield server
    finally:
        server.close()
