"""The HTTP server: routes, keep-alive, gzip, TLS and basic auth, over real sockets."""

from __future__ import annotations

import base64
import gzip
import http.client
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from foundation.errors import ConfigError
from foundation.http_server import MetricsHTTPServer, Request, Response, parse_listen_address
from foundation.web_config import WebConfig, load_web_config

BIG = b"ibpool_test 1\n" * 500


def _serve(web: WebConfig | None = None) -> MetricsHTTPServer:
    server = MetricsHTTPServer(("127.0.0.1", 0), web)
    server.route("GET", "/metrics", lambda _: Response(200, BIG))
    server.route("POST", "/echo", lambda r: Response(200, r.body + repr(r.query).encode()))

    def boom(_: Request) -> Response:
        raise RuntimeError("bug")

    server.route("GET", "/boom", boom)
    server.serve_in_thread()
    return server


@pytest.fixture
def server() -> Iterator[MetricsHTTPServer]:
    srv = _serve()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_keep_alive_connection_serves_many_requests(server: MetricsHTTPServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for _ in range(5):
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200 and response.read() == BIG
    conn.close()


def test_gzip_when_asked(server: MetricsHTTPServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
    response = conn.getresponse()
    assert response.getheader("Content-Encoding") == "gzip"
    assert gzip.decompress(response.read()) == BIG


def test_errors_and_methods(server: MetricsHTTPServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for method, path, status in [
        ("GET", "/nope", 404),
        ("POST", "/metrics", 405),
        ("GET", "/boom", 500),
        ("HEAD", "/metrics", 200),
    ]:
        conn.request(method, path)
        response = conn.getresponse()
        body = response.read()
        assert response.status == status, (method, path)
        if method == "HEAD":
            assert body == b"" and response.getheader("Content-Length") == str(len(BIG))
    conn.request("POST", "/echo?kind=xid&gpu=3", body=b"hello")
    assert conn.getresponse().read() == b"hello{'kind': ['xid'], 'gpu': ['3']}"


def test_garbage_request_gets_400(server: MetricsHTTPServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")


def test_listen_address_parsing() -> None:
    assert parse_listen_address(":9470") == ("0.0.0.0", 9470)
    assert parse_listen_address("127.0.0.1:1") == ("127.0.0.1", 1)
    assert parse_listen_address("[::1]:80") == ("::1", 80)
    for bad in ("9470", "host:", "host:99999", "host:port"):
        with pytest.raises(ValueError):
            parse_listen_address(bad)


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return d / "cert.pem", d / "key.pem"


def test_tls_and_basic_auth_from_a_web_config_file(tmp_path: Path, cert: tuple[Path, Path]) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(
        f"tls_server_config:\n  cert_file: {cert[0]}\n  key_file: {cert[1]}\n"
        f"basic_auth_users:\n  alice: '{hashed}'\n"
    )
    srv = _serve(load_web_config(config))
    try:
        ctx = ssl.create_default_context(cafile=str(cert[0]))
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=5)
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        response.read()
        assert response.status == 401 and "Basic" in (response.getheader("WWW-Authenticate") or "")
        for password, status in [(b"wrong", 401), (b"s3cret", 200), (b"s3cret", 200)]:
            token = base64.b64encode(b"alice:" + password).decode()
            conn.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
            response = conn.getresponse()
            response.read()
            assert response.status == status
        plain = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            plain.request("GET", "/metrics")
            plain.getresponse().read()
    finally:
        srv.shutdown()
        srv.server_close()


def test_web_config_lists_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "web.yml"
    config.write_text(
        "tls_server_config:\n  cert_file: missing.crt\n  client_auth_type: Sometimes\n"
        "basic_auth_users:\n  bob: plaintext\nextra: 1\n"
    )
    with pytest.raises(ConfigError) as err:
        load_web_config(config)
    text = "\n".join(err.value.problems)
    for key in (
        "extra",
        "tls_server_config.cert_file",
        "tls_server_config.key_file",
        "tls_server_config.client_auth_type",
        "basic_auth_users.bob",
    ):
        assert f"{config}: {key}:" in text
