"""`ibpool approval-server`: approvals over HTTP(S) for a web UI or a chat bot, as the authenticated user.

    ibpool approval-server --db /var/lib/ibpool/ibpool.db --web.config.file web.yml \\
        [--approval.config-file approval.yaml] [--approval.trusted-user-header X-Remote-User]

Who may act is decided by the web config (`foundation.web_config`: TLS and bcrypt basic-auth users) or by
a trusted proxy: with `--approval.trusted-user-header` the proxy's header names the user, and the header
is honoured only then. Refused at start (exit 2): no basic-auth users and no trusted header (anyone could
approve); basic auth without TLS off loopback (passwords in clear); a trusted header on a non-loopback
address without basic auth or verified client certificates (anyone could set the header). The routes are
in `proposals.approval_api`; the trust model in docs/approvals.md. Default port 9475.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from foundation.errors import ConfigError, IbpoolError
from foundation.http_server import MetricsHTTPServer, parse_listen_address
from foundation.service import run_service, web_config_of
from foundation.settings import Bad, CommandSettings, Option
from foundation.web_config import WebConfig, load_web_config
from proposals.approval_api import ApprovalApi, Authenticator
from proposals.approval_config import DEFAULT_CONFIG, ApprovalConfig, load_approval_config
from proposals.errors import ApprovalConfigError, StoreError
from proposals.store import Store

log = logging.getLogger(__name__)

DEFAULT_LISTEN = ":9475"
DEFAULT_DB = Path("/var/lib/ibpool/ibpool.db")
_HEADER = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,63}")
_RESERVED_HEADERS = frozenset({"authorization", "host", "content-type", "content-length", "connection"})


@dataclass(frozen=True)
class ApprovalServerConfig:
    """The approval endpoint's settings."""

    db: Path | None = None
    approval_config_file: Path | None = None
    trusted_user_header: str | None = None
    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    log_level: str = "info"

    @property
    def store_path(self) -> Path:
        """`db`, else $IBPOOL_DB, else the default store."""
        if self.db is not None:
            return self.db
        env = os.environ.get("IBPOOL_DB")
        return Path(env) if env else DEFAULT_DB


OPTIONS: tuple[Option, ...] = (
    Option("--db", "db", "db", Path, f"proposal store ($IBPOOL_DB, else {DEFAULT_DB})"),
    Option("--approval.config-file", "approval.config_file", "approval_config_file", Path,
           "approval policy file: blast-radius limits (default: built-in limits)"),
    Option("--approval.trusted-user-header", "approval.trusted_user_header", "trusted_user_header", str,
           "header a trusted proxy sets to the authenticated user (honoured only when given)"),
)  # fmt: skip


def _loopback(listen_address: str) -> bool:
    try:
        host, _ = parse_listen_address(listen_address)
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate(cfg: ApprovalServerConfig, bad: Bad) -> None:
    """Refuse a configuration under which the endpoint could not tell who approves."""
    web = WebConfig()
    if cfg.web_config_file is not None and cfg.web_config_file.is_file():
        try:
            web = load_web_config(cfg.web_config_file)
        except ConfigError as exc:
            for problem in exc.problems:
                bad("web_config_file", problem)
    header = cfg.trusted_user_header
    if header is not None and (not _HEADER.fullmatch(header) or header.lower() in _RESERVED_HEADERS):
        bad("trusted_user_header", f"must be an HTTP header name other than {sorted(_RESERVED_HEADERS)}")
    loopback = _loopback(cfg.listen_address)
    verified_clients = web.tls is not None and web.tls.client_auth_type == "RequireAndVerifyClientCert"
    if not web.users and header is None:
        bad(
            "web_config_file",
            "needs basic_auth_users (or --approval.trusted-user-header): approvals need a user",
        )
    if web.users and web.tls is None and not loopback:
        bad("web_config_file", "basic auth off loopback needs tls_server_config (else passwords go in clear)")
    if header is not None and not web.users and not verified_clients and not loopback:
        bad(
            "trusted_user_header",
            "a trusted header off loopback needs basic auth or verified client certificates for the proxy",
        )
    if cfg.approval_config_file is not None:
        try:
            load_approval_config(cfg.approval_config_file)
        except ApprovalConfigError as exc:
            for problem in exc.problems:
                bad("approval_config_file", problem)
    try:
        Store(cfg.store_path, create=False, read_only=True).close()  # exists, and passes quick_check
    except StoreError as exc:
        bad("db", str(exc))


SETTINGS = CommandSettings(
    prog="ibpool approval-server",
    description="Approve or reject proposals over HTTP(S), as the authenticated user.",
    config_type=ApprovalServerConfig,
    options=OPTIONS,
    validate=validate,
    default_listen=DEFAULT_LISTEN,
)


class ApprovalServer:
    """The HTTP server with the approval routes; `start`, then `close`."""

    def __init__(self, cfg: ApprovalServerConfig) -> None:
        self.cfg = cfg
        self.web = web_config_of(cfg)
        approval: ApprovalConfig = DEFAULT_CONFIG
        if cfg.approval_config_file is not None:
            approval = load_approval_config(cfg.approval_config_file)
        header = cfg.trusted_user_header.lower() if cfg.trusted_user_header else None
        self.api = ApprovalApi(cfg.store_path, approval, Authenticator(bool(self.web.users), header))
        try:
            self.server = MetricsHTTPServer(parse_listen_address(cfg.listen_address), self.web)
        except OSError as exc:
            raise IbpoolError(f"cannot listen on {cfg.listen_address}: {exc.strerror or exc}") from None
        self.api.install(self.server, cfg.telemetry_path)

    @property
    def port(self) -> int:
        """The TCP port the server is bound to."""
        return self.server.port

    def start(self) -> None:
        """Serve on a daemon thread."""
        self.server.serve_in_thread()
        log.info(
            "approvals on %s (%s), store %s",
            self.cfg.listen_address,
            "https" if self.web.tls else "http",
            self.cfg.store_path,
        )

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def serve(cfg: ApprovalServerConfig, stop: threading.Event) -> int:
    """Serve until `stop` is set."""
    server = ApprovalServer(cfg)
    server.start()
    try:
        stop.wait()
    finally:
        server.close()
    return 0


def main(argv: list[str]) -> int:
    """Entry point of `ibpool approval-server`; exit 2 on an invalid config, 1 when it cannot start."""
    return run_service("ibpool approval-server", argv, SETTINGS.load, serve)
