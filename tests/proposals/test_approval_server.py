"""`ibpool approval-server` as a real process: approvals over HTTPS with basic auth, or behind a trusted
proxy header, recorded as the authenticated user; the four-eyes rule across the CLI and HTTP."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from foundation.identity import os_actor
from proposals.store import Store
from simulator.backends.processes import free_port
from tests.proposals.factory import move_doc, vl_weights_doc

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FUTURE = {"created_at": "2024-05-01T12:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}
ME = os_actor().name  # the OS account these tests (and the CLI they run) act as
USERS = ("alice", "bob", "carol", "dave", "erin", "frank", ME)


@dataclass
class Server:
    """A running approval server and how to talk to it."""

    proc: subprocess.Popen[bytes]
    port: int
    context: ssl.SSLContext | None

    def request(  # noqa: PLR0917 (a test helper)
        self,
        method: str,
        path: str,
        user: str | None = None,
        body: object = None,
        headers: dict[str, str] | None = None,
        password: str | None = None,
    ) -> tuple[int, Any]:
        if self.context is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, context=self.context, timeout=30
            )
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = dict(headers or {})
        if user is not None:
            token = base64.b64encode(f"{user}:{password or 'pw-' + user}".encode()).decode()
            sent["Authorization"] = f"Basic {token}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(raw) if kind.startswith("application/json") else raw.decode()

    def approve(self, pid: str, user: str | None, **extra: Any) -> tuple[int, Any]:
        return self.request("POST", "/api/v1/approve", user, {"id": pid}, **extra)


def cli(db: Path, *argv: str) -> str:
    command = [sys.executable, "-m", "ibpool", "proposals", "--db", str(db), *argv]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def submit(db: Path, tmp: Path, doc: dict[str, Any], by: str) -> str:
    path = tmp / f"p{time.monotonic_ns()}.json"
    path.write_text(json.dumps(doc | FUTURE))
    return cli(db, "submit", str(path), "--by", by).strip()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return d / "cert.pem", d / "key.pem"


def web_config(path: Path, tls: tuple[Path, Path] | None, users: tuple[str, ...] = USERS) -> Path:
    lines = []
    if tls is not None:
        lines += ["tls_server_config:", f"  cert_file: {tls[0]}", f"  key_file: {tls[1]}"]
    if users:
        lines.append("basic_auth_users:")
        for user in users:
            hashed = bcrypt.hashpw(f"pw-{user}".encode(), bcrypt.gensalt(rounds=4)).decode()
            lines.append(f"  {user}: '{hashed}'")
    path.write_text("\n".join(lines) + "\n")
    return path


def run_server(*argv: str) -> subprocess.CompletedProcess[str]:
    """The server run to completion (for a refused configuration)."""
    command = [sys.executable, "-m", "ibpool", "approval-server", *argv]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def start_server(port: int, context: ssl.SSLContext | None, *argv: str) -> Iterator[Server]:
    command = [sys.executable, "-m", "ibpool", "approval-server", "--web.listen-address", f"127.0.0.1:{port}"]
    proc = subprocess.Popen([*command, *argv], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Server(proc, port, context)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                server.request("GET", "/healthz")  # any answer (401 with basic auth): it is up
                break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the approval server did not start"
            time.sleep(0.05)
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        if proc.stderr is not None:
            assert "Traceback" not in proc.stderr.read().decode()
            proc.stderr.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ibpool.db"
    Store(path).close()
    return path


@pytest.fixture
def https(tmp_path: Path, db: Path, tls: tuple[Path, Path]) -> Iterator[Server]:
    config = web_config(tmp_path / "web.yml", tls)
    context = ssl.create_default_context(cafile=str(tls[0]))
    yield from start_server(free_port(), context, "--db", str(db), "--web.config.file", str(config))


def test_approvals_over_https_are_recorded_as_the_authenticated_user(
    https: Server, db: Path, tmp_path: Path
) -> None:
    pid = submit(db, tmp_path, vl_weights_doc(), "carol")
    assert https.approve(pid, None)[0] == 401
    assert https.approve(pid, "bob", password="wrong")[0] == 401
    status, body = https.request("POST", "/api/v1/approve", "bob", b"id=" + pid.encode(),
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert status == 415, body  # what a cross-site form could send
    status, body = https.approve(pid, "carol")
    assert status == 403 and "the approver must not be the proposer" in body["error"]
    status, body = https.approve(pid, "bob", headers={"X-Remote-User": "zed"})  # not configured: ignored
    assert status == 200 and body == {"id": pid, "state": "approved", "who": "bob", "actor": "http:bob"}
    status, body = https.approve(pid, "alice")
    assert status == 409 and "cannot move it to approved" in body["error"]
    status, shown = https.request("GET", f"/api/v1/proposal?id={pid[:12]}", "alice")
    assert status == 200 and shown["state"] == "approved" and shown["proposer_actor"] == str(os_actor())
    assert [(a["who"], a["actor"], a["result"]) for a in shown["audit"]] == [
        ("carol", str(os_actor()), "ok"),
        ("carol", "http:carol", "refused"),
        ("bob", "http:bob", "ok"),
    ]
    assert https.request("GET", "/api/v1/proposal?id=deadbeef", "alice")[0] == 404
    status, listed = https.request("GET", "/api/v1/proposals?state=approved", "dave")
    assert status == 200 and [p["id"] for p in listed["proposals"]] == [pid]
    assert https.request("GET", "/api/v1/proposals?state=done", "dave")[0] == 400
    status, metrics = https.request("GET", "/metrics", "dave")
    assert 'ibpool_approval_requests_total{action="approve",status="200"} 1' in metrics


def test_the_same_person_on_the_cli_and_over_http_is_refused(https: Server, db: Path, tmp_path: Path) -> None:
    pid = submit(db, tmp_path, vl_weights_doc(), "someone-else")  # as this OS account, under another name
    status, body = https.approve(pid, ME)  # the same name, authenticated over HTTP
    assert status == 403 and "same person" in body["error"], body
    assert https.approve(pid, "erin")[0] == 200


def test_rejects_and_bad_requests(https: Server, db: Path, tmp_path: Path) -> None:
    pid = submit(db, tmp_path, move_doc(1, 4) | {"policy": "rebalance"}, "carol")
    for body, status in [([pid], 400), ({"id": pid, "by": "mallory"}, 400), ({"id": 7}, 400), ({}, 400)]:
        assert https.request("POST", "/api/v1/approve", "bob", body)[0] == status, body
    assert https.request("POST", "/api/v1/approve", "bob", b"{not json")[0] == 400
    assert https.request("POST", "/api/v1/approve", "bob", b"[" * 60_000)[0] == 400  # no RecursionError
    status, body = https.request("POST", "/api/v1/reject", "dave", {"id": pid, "reason": "not tonight"})
    assert status == 200 and body["state"] == "rejected"
    assert json.loads(cli(db, "audit", pid, "--json"))[-1]["detail"] == "not tonight"


def test_concurrent_approvals_approve_once(https: Server, db: Path, tmp_path: Path) -> None:
    pid = submit(db, tmp_path, vl_weights_doc(policy="race"), "carol")
    results: list[int] = []
    lock = threading.Lock()

    def approve(user: str) -> None:
        status = https.approve(pid, user)[0]
        with lock:
            results.append(status)

    threads = [threading.Thread(target=approve, args=(user,)) for user in USERS[:6] if user != "carol"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [200] + [409] * (len(threads) - 1)
    audit = json.loads(cli(db, "audit", pid, "--json"))
    assert [a["to_state"] for a in audit if a["result"] == "ok"] == ["pending", "approved"]


def test_a_trusted_proxy_header_is_honoured_only_when_configured(db: Path, tmp_path: Path) -> None:
    pid = submit(db, tmp_path, vl_weights_doc(policy="proxy"), "carol")
    port = free_port()
    for server in start_server(
        port, None, "--db", str(db), "--approval.trusted-user-header", "X-Remote-User"
    ):
        assert server.approve(pid, None)[0] == 401
        assert server.approve(pid, None, headers={"X-Remote-User": "carol"})[0] == 403
        status, body = server.approve(pid, None, headers={"X-Remote-User": "dave"})
        assert status == 200 and body["actor"] == "proxy:dave" and body["who"] == "dave"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ([], "approvals need a user"),
        (["--web.listen-address", ":0", "--web.config.file", "{plain}"], "passwords go in clear"),
        (["--web.listen-address", ":0", "--approval.trusted-user-header", "X-User"], "a trusted header off"),
        (["--approval.trusted-user-header", "Authorization"], "trusted_user_header: must be an HTTP header"),
        (["--web.config.file", "{plain}", "--db", "{missing}"], "no proposal store"),
    ],
)
def test_a_configuration_that_cannot_tell_who_approves_is_refused(
    tmp_path: Path, db: Path, argv: list[str], problem: str
) -> None:
    plain = web_config(tmp_path / "plain.yml", None)
    values = {"plain": str(plain), "missing": str(tmp_path / "missing.db")}
    given = [arg.format(**values) for arg in argv]
    if "--db" not in given:
        given += ["--db", str(db)]
    if "--web.listen-address" not in given:
        given += ["--web.listen-address", "127.0.0.1:0"]
    result = run_server(*given)
    assert result.returncode == 2 and problem in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_damaged_store_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    plain = web_config(tmp_path / "plain.yml", None)
    result = run_server(
        "--db", str(path), "--web.config.file", str(plain), "--web.listen-address", "127.0.0.1:0"
    )
    assert result.returncode == 2 and "db:" in result.stderr and "Traceback" not in result.stderr
