"""A small, fast HTTP/1.1 server for /metrics and /healthz.

The standard library's BaseHTTPRequestHandler parses headers through the email package, which costs
more than rendering a node's metrics. This server parses only the request line and the headers it needs,
keeps connections alive (Prometheus reuses them), gzips when asked, and optionally speaks TLS and checks
basic auth (see web_config).
"""

from __future__ import annotations

import logging
import socket
import socketserver
import ssl
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from foundation.web_config import BasicAuth, WebConfig

log = logging.getLogger(__name__)

MAX_LINE = 8192
MAX_HEADERS = 100
MAX_BODY = 65536
IDLE_TIMEOUT_SECONDS = 120.0
GZIP_MIN_BYTES = 1024

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Request:
    """What a route sees of a request."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    """What a route returns."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[Request], Response]


class _BadRequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


class _Handler(socketserver.StreamRequestHandler):
    server: MetricsHTTPServer
    timeout = IDLE_TIMEOUT_SECONDS

    def setup(self) -> None:
        tls = self.server.tls_context
        if tls is not None:
            self.request.settimeout(10.0)
            self.request = tls.wrap_socket(self.request, server_side=True)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle(self) -> None:
        try:
            while self._handle_one():
                pass
        except (ConnectionError, TimeoutError, ssl.SSLError, OSError) as exc:
            log.debug("connection from %s ended: %s", self.client_address, exc)

    def _read_head(self) -> tuple[str, str, str, dict[str, str]] | None:
        line = self.rfile.readline(MAX_LINE + 1)
        if not line:
            return None
        if len(line) > MAX_LINE:
            raise _BadRequestError(400, "request line too long")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _BadRequestError(400, "malformed request line")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = self.rfile.readline(MAX_LINE + 1)
            if raw in (b"\r\n", b"\n", b""):
                return parts[0], parts[1], parts[2], headers
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep or len(raw) > MAX_LINE:
                raise _BadRequestError(400, "malformed header")
            headers[name.strip().lower()] = value.strip()
        raise _BadRequestError(400, "too many headers")

    def _handle_one(self) -> bool:
        try:
            head = self._read_head()
        except _BadRequestError as exc:
            self._send(Response(exc.status, f"{exc}\n".encode()), keep_alive=False, head_only=False)
            return False
        if head is None:
            return False
        method, target, version, headers = head
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        try:
            body = self._read_body(headers)
        except _BadRequestError as exc:
            self._send(Response(exc.status, f"{exc}\n".encode()), keep_alive=False, head_only=False)
            return False
        response = self.server.dispatch(method, target, headers, body)
        accepts_gzip = "gzip" in headers.get("accept-encoding", "")
        self._send(response, keep_alive, method == "HEAD", accepts_gzip)
        return keep_alive

    def _read_body(self, headers: dict[str, str]) -> bytes:
        if "transfer-encoding" in headers:
            raise _BadRequestError(400, "chunked request bodies are not accepted")
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise _BadRequestError(400, "bad content-length")
        length = int(length_text)
        if length > MAX_BODY:
            raise _BadRequestError(413, "request body too large")
        return self.rfile.read(length) if length else b""

    def _send(self, response: Response, keep_alive: bool, head_only: bool, gzip_ok: bool = False) -> None:
        body = response.body
        extra = ""
        if gzip_ok and len(body) >= GZIP_MIN_BYTES:
            body = _gzip(body)
            extra = "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n"
        for name, value in response.headers.items():
            extra += f"{name}: {value}\r\n"
        head = (
            f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}\r\n"
            f"Content-Type: {response.content_type}\r\nContent-Length: {len(body)}\r\n{extra}"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        self.wfile.write(head.encode("latin-1") if head_only else head.encode("latin-1") + body)


class MetricsHTTPServer(socketserver.ThreadingTCPServer):
    """Threaded HTTP server with exact-path routes, optional TLS and basic auth."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], web: WebConfig | None = None) -> None:
        web = web or WebConfig()
        self.tls_context = web.tls.context() if web.tls is not None else None
        self.auth = BasicAuth(web.users)
        self.routes: dict[tuple[str, str], Route] = {}
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)

    @property
    def port(self) -> int:
        """The TCP port actually bound (useful with port 0)."""
        return int(self.server_address[1])

    def route(self, method: str, path: str, handler: Route) -> None:
        """Serve `handler` for `method` on exactly `path` (GET routes answer HEAD too)."""
        self.routes[(method, path)] = handler

    def dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Response:
        """Find the route for a request and run it; errors become 500 with a log line."""
        if not self.auth.check(headers.get("authorization")):
            return Response(401, b"Unauthorized\n", headers={"WWW-Authenticate": 'Basic realm="ibpool"'})
        split = urlsplit(target)
        lookup = "GET" if method == "HEAD" else method
        handler = self.routes.get((lookup, split.path))
        if handler is None:
            if any(path == split.path for _, path in self.routes):
                return Response(405, b"Method Not Allowed\n")
            return Response(404, b"Not Found\n")
        request = Request(method, split.path, parse_qs(split.query), headers, body)
        try:
            return handler(request)
        except Exception:
            log.exception("handler for %s %s failed", method, split.path)
            return Response(500, b"Internal Server Error\n")

    def serve_in_thread(self) -> threading.Thread:
        """Start serving on a daemon thread and return it."""
        thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        thread.start()
        return thread


def parse_listen_address(text: str) -> tuple[str, int]:
    """`host:port`, `:port` or `[v6]:port` into a bind address; raise ValueError when malformed."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"expected host:port, got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)
