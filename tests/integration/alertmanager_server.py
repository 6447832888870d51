"""A real Alertmanager for integration tests, routing every alert to a webhook the test itself serves.

```python
with alertmanager_server.running() as am:                  # Alertmanager + its webhook receiver
    alert = am.webhook.wait_for_alert(alertname="GpuXidError", node="node0003")   # labels must match
    am.webhook.notifications()                             # every webhook payload received, in order
    am.alerts()                                            # what Alertmanager holds (GET /api/v2/alerts)
```

A config that Alertmanager refuses fails the start with its own message; `DEFAULT_ROUTE` says how soon.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.integration.processes import free_port, http_get, start_http_program, stop, wait_until

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
WEBHOOK_PATH = "/alerts"
# Grouped by every label (one notification per alert), sent at once: a firing alert reaches the webhook
# within about a second of reaching Alertmanager. Resolved alerts are sent too (`send_resolved`).
DEFAULT_ROUTE: Mapping[str, Any] = {
    "group_by": ["..."],
    "group_wait": "0s",
    "group_interval": "1s",
    "repeat_interval": "1h",
}

Notification = dict[str, Any]  # one webhook payload (version 4): status, alerts, groupLabels, ...
Alert = dict[str, Any]  # one alert of a payload: status, labels, annotations, startsAt, ...


class WebhookReceiver:
    """A tiny HTTP server that keeps every JSON payload POSTed to `WEBHOOK_PATH`."""

    def __init__(self) -> None:
        self._payloads: list[Notification] = []
        self._errors: list[str] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver._receive(self.path, body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """What goes into Alertmanager's `webhook_configs: [{url: ...}]`."""
        return f"http://127.0.0.1:{self.port}{WEBHOOK_PATH}"

    def _receive(self, path: str, body: bytes) -> None:
        with self._changed:
            if urllib.parse.urlsplit(path).path != WEBHOOK_PATH:
                self._errors.append(f"POST to unexpected path {path}")
            else:
                try:
                    payload = json.loads(body)
                except ValueError as exc:
                    self._errors.append(f"not JSON ({exc}): {body[:200]!r}")
                else:
                    self._payloads.append(payload)
            self._changed.notify_all()

    def notifications(self) -> list[Notification]:
        """Every payload received so far, in arrival order; AssertionError if a request was malformed."""
        with self._changed:
            if self._errors:
                raise AssertionError(f"webhook received malformed requests: {self._errors}")
            return list(self._payloads)

    def alerts(self, status: str | None = "firing") -> list[Alert]:
        """The alerts of every payload (with that `status`; None: any), oldest first."""
        return [
            alert
            for payload in self.notifications()
            for alert in payload.get("alerts", [])
            if status is None or alert.get("status") == status
        ]

    def wait_for(
        self, predicate: Callable[[list[Alert]], bool], timeout: float = 30.0, what: str = ""
    ) -> None:
        """Until `predicate(firing alerts received)` holds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.alerts()):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted({a["labels"].get("alertname", "?") for a in self.alerts(None)})
                    raise AssertionError(
                        f"timed out after {timeout:g} s waiting for {what or 'alerts'} at the webhook "
                        f"({len(self._payloads)} notifications so far, alerts: {names})"
                    )
                self._changed.wait(min(left, 0.5))

    def wait_for_alert(self, timeout: float = 30.0, **labels: str) -> Alert:
        """The first firing alert received whose labels include `labels` (waiting for it)."""
        wanted = set(labels.items())
        found: list[Alert] = []

        def arrived(alerts: list[Alert]) -> bool:
            found[:] = [a for a in alerts if wanted <= set(a.get("labels", {}).items())]
            return bool(found)

        self.wait_for(arrived, timeout, f"a firing alert with {labels}")
        return found[0]

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)


def config_text(webhook_url: str, route: Mapping[str, Any] | None = None, **extra: Any) -> str:
    """An Alertmanager config sending every alert to `webhook_url` (`extra`: e.g. inhibit_rules)."""
    config: dict[str, Any] = {
        "route": {"receiver": "webhook", **(DEFAULT_ROUTE if route is None else route)},
        "receivers": [
            {"name": "webhook", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]},
        ],
        **extra,
    }
    return yaml.safe_dump(config, sort_keys=False)


@dataclass
class AlertmanagerServer:
    """A running Alertmanager and the webhook it notifies."""

    port: int
    workdir: Path
    process: subprocess.Popen[bytes]
    webhook: WebhookReceiver
    owns_workdir: bool = True
    _stopped: bool = field(default=False, repr=False)

    @property
    def address(self) -> str:
        """HOST:PORT, for Prometheus's `alerting.alertmanagers[].static_configs[].targets`."""
        return f"127.0.0.1:{self.port}"

    def alerts(self, **filters: str) -> list[Alert]:
        """The alerts Alertmanager holds now (GET /api/v2/alerts; `filters` as `filter=label="value"`)."""
        query = urllib.parse.urlencode([("filter", f'{k}="{v}"') for k, v in filters.items()])
        status, body = http_get(self.port, "/api/v2/alerts" + (f"?{query}" if query else ""))
        if status != 200:
            raise AssertionError(f"alertmanager /api/v2/alerts: {status} {body[:300]!r}")
        alerts: list[Alert] = json.loads(body)
        return alerts

    def stop(self) -> int:
        """Stop Alertmanager (SIGTERM, then SIGKILL) and the webhook; remove the directory; the exit code."""
        if self._stopped:
            return self.process.returncode
        self._stopped = True
        try:
            return stop(self.process, timeout=15.0)
        finally:
            self.webhook.close()
            if self.owns_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)


def start(
    route: Mapping[str, Any] | None = None,
    workdir: Path | None = None,
    timeout: float = 30.0,
    **extra: Any,
) -> AlertmanagerServer:
    """Start a webhook receiver and an Alertmanager routing to it; wait until Alertmanager is ready."""
    if ALERTMANAGER is None:
        raise AssertionError("alertmanager is not installed (Debian package: prometheus-alertmanager)")
    owns = workdir is None
    work = Path(tempfile.mkdtemp(prefix="ibpool-alertmanager-")) if workdir is None else workdir
    webhook = WebhookReceiver()
    try:
        config = work / "alertmanager.yml"
        config.write_text(config_text(webhook.url, route, **extra))
        port = free_port()
        argv = [
            ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # no gossip port: a single instance
            "--log.level=warn",
        ]
        process = start_http_program(argv, port, ready_path="/-/ready", timeout=timeout)
    except BaseException:
        webhook.close()
        if owns:
            shutil.rmtree(work, ignore_errors=True)
        raise
    server = AlertmanagerServer(port, work, process, webhook, owns)
    try:
        wait_until(lambda: http_get(port, "/-/ready")[0] == 200, timeout, "alertmanager to be ready")
    except BaseException:
        server.stop()
        raise
    return server


@contextmanager
def running(route: Mapping[str, Any] | None = None, **kwargs: Any) -> Iterator[AlertmanagerServer]:
    """`start`, yield the server, `stop`."""
    server = start(route, **kwargs)
    try:
        yield server
    finally:
        server.stop()
