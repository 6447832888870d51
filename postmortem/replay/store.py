"""A private VictoriaMetrics for one replay: series in, the replay's results out, removed at the end.

```python
with ScratchStore.start() as store:        # victoria-metrics on a free loopback port, storage in a temp dir
    store.import_lines(data)                # VictoriaMetrics JSON lines (/api/v1/import), gzip or plain
    store.flush()                           # searchable now
    store.export('ALERTS{alertstate="firing"}', start, end)
```

Flags: `-retentionPeriod=100y` (an incident from months ago is not dropped on import),
`-search.disableCache` (results computed before a replay wrote more samples are never reused),
`-search.latencyOffset=0s`, `-dedup.minScrapeInterval=1ms` (a sample imported twice counts once).
The process leads its own process group and is stopped (SIGTERM, then SIGKILL) in every exit path.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from postmortem.replay.errors import ReplayError, ReplayUnavailableError

PROGRAM = "victoria-metrics"
PACKAGE_HINT = "Debian package victoria-metrics"


def program(name: str) -> str:
    """The path of a replay program; ReplayUnavailableError names the package when it is missing."""
    path = shutil.which(name)
    if path is None:
        raise ReplayUnavailableError(f"{name} not installed ({PACKAGE_HINT})")
    return path


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ScratchStore:
    """One victoria-metrics process with its own storage; `close()` stops it and removes the storage."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, storage: Path) -> None:
        self.process = process
        self.port = port
        self.storage = storage

    @property
    def url(self) -> str:
        """Base URL (Prometheus query API, import and remote write)."""
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, timeout: float = 30.0) -> ScratchStore:
        """Start and wait for /health (ReplayError with the log's tail when it does not come up)."""
        binary = program(PROGRAM)
        storage = Path(tempfile.mkdtemp(prefix="ibpool-replay-"))
        port = free_port()
        argv = [
            binary,
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-storageDataPath={storage / 'data'}",
            "-retentionPeriod=100y",
            "-search.disableCache",
            "-search.latencyOffset=0s",
            "-dedup.minScrapeInterval=1ms",
            "-loggerLevel=ERROR",
        ]
        log = (storage / "victoria-metrics.log").open("wb")
        try:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            log.close()
            shutil.rmtree(storage, ignore_errors=True)
            raise ReplayError(f"cannot start {binary}: {exc}") from None
        finally:
            log.close()
        store = cls(process, port, storage)
        try:
            store._wait_healthy(timeout)
        except BaseException:
            store.close()
            raise
        return store

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReplayError(
                    f"victoria-metrics exited with {self.process.returncode}: {self.log_tail()}"
                )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/health", timeout=2.0) as got,
            ):
                if got.status == 200:
                    return
            time.sleep(0.05)
        raise ReplayError(f"victoria-metrics did not answer /health within {timeout:g} s: {self.log_tail()}")

    def log_tail(self, limit: int = 400) -> str:
        """The end of the server's log, for error messages."""
        try:
            return (self.storage / "victoria-metrics.log").read_text(errors="replace")[-limit:].strip()
        except OSError:
            return ""

    def _request(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> bytes:
        request = urllib.request.Request(self.url + path, data=data, headers=headers or {})
        endpoint = path.split("?", maxsplit=1)[0]
        try:
            with urllib.request.urlopen(request, timeout=120.0) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")[:300]
            raise ReplayError(f"victoria-metrics {endpoint}: HTTP {exc.code}: {body}") from None
        except OSError as exc:
            raise ReplayError(f"victoria-metrics {endpoint}: {exc}") from None

    def import_lines(self, data: bytes) -> None:
        """Samples in VictoriaMetrics' JSON-lines format (gzip-compressed or plain)."""
        headers = {"Content-Encoding": "gzip"} if data[:2] == b"\x1f\x8b" else {}
        self._request("/api/v1/import", data, headers)

    def flush(self) -> None:
        """Make everything written so far searchable."""
        self._request("/internal/force_flush")

    def export(self, match: str, start: float, end: float) -> list[dict[str, Any]]:
        """Raw samples of the matching series in [start, end] (one JSON object per series)."""
        query = urllib.parse.urlencode({"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
        body = self._request(f"/api/v1/export?{query}")
        return [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]

    def close(self) -> None:
        """Stop the server (its process group) and remove its storage; safe to call twice."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15.0)
        shutil.rmtree(self.storage, ignore_errors=True)

    def __enter__(self) -> ScratchStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def gzip_lines(series: list[dict[str, Any]]) -> bytes:
    """Series objects (`metric`, `values`, `timestamps` in ms) as gzip-compressed JSON lines."""
    text = "".join(json.dumps(item, sort_keys=True, separators=(",", ":")) + "\n" for item in series)
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
