"""InfluxWriter: what each HTTP answer (or none) means, against a small local HTTP server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from exporter.influx.writer import InfluxWriter, outcome_of, retry_after_of
from tests.integration.processes import free_port


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (204, "ok"),
        (200, "ok"),
        (400, "reject"),
        (413, "reject"),
        (422, "reject"),
        (401, "retry"),
        (404, "retry"),
        (429, "retry"),
        (500, "retry"),
        (503, "retry"),
    ],
)
def test_outcome_of_status(status: int, outcome: str) -> None:
    assert outcome_of(status) == outcome


def test_retry_after_in_seconds_only() -> None:
    assert retry_after_of({"Retry-After": "7"}) == 7.0
    assert retry_after_of([("retry-after", "1.5")]) == 1.5
    assert retry_after_of({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after_of(None) is None


class Answers(http.server.BaseHTTPRequestHandler):
    """Answers POSTs with the status (and Retry-After) queued by the test; records the bodies."""

    replies: ClassVar[list[tuple[int, dict[str, str]]]] = []
    bodies: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Answers.bodies.append((self.path, body))
        status, headers = Answers.replies.pop(0) if Answers.replies else (204, {})
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def server() -> Iterator[int]:
    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Answers)
    Answers.replies, Answers.bodies = [], []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield port
    httpd.shutdown()
    httpd.server_close()


def test_a_write_posts_line_protocol_with_ns_precision(server: int) -> None:
    writer = InfluxWriter(f"http://127.0.0.1:{server}", "b1", org="o1", token="t")
    result = writer.write(b"m value=1 5\n")
    writer.close()
    assert result.outcome == "ok"
    path, body = Answers.bodies[0]
    assert path.startswith("/api/v2/write?")
    assert "bucket=b1" in path and "precision=ns" in path
    assert body.rstrip(b"\n") == b"m value=1 5"


def test_server_answers_become_outcomes(server: int) -> None:
    Answers.replies = [(503, {"Retry-After": "3"}), (400, {})]
    writer = InfluxWriter(f"http://127.0.0.1:{server}", "b")
    unavailable = writer.write(b"m value=1 5\n")
    refused = writer.write(b"m value=1 5\n")
    writer.close()
    assert (unavailable.outcome, unavailable.status, unavailable.retry_after) == ("retry", 503, 3.0)
    assert (refused.outcome, refused.status) == ("reject", 400)


def test_no_server_is_a_retry() -> None:
    writer = InfluxWriter(f"http://127.0.0.1:{free_port()}", "b", timeout_seconds=2.0)
    result = writer.write(b"m value=1 5\n")
    writer.close()
    assert result.outcome == "retry"
    assert result.status is None
