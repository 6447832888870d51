"""The web configuration file (TLS and basic auth), in the format of Prometheus' exporter-toolkit.

```yaml
tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert   # optional
  client_ca_file: ca.crt                         # needed with client verification
  min_version: TLS12                             # optional: TLS12 or TLS13
basic_auth_users:
  alice: $2b$12$...                              # bcrypt hash
```
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import yaml

from foundation.errors import ConfigError

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class TlsConfig:
    """Server certificate and optional client verification."""

    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"

    def context(self) -> ssl.SSLContext:
        """A server-side SSL context for these settings."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = _TLS_VERSIONS[self.min_version]
        ctx.load_cert_chain(self.cert_file, self.key_file)
        ctx.verify_mode = _CLIENT_AUTH[self.client_auth_type]
        if self.client_ca_file is not None:
            ctx.load_verify_locations(self.client_ca_file)
        return ctx


@dataclass(frozen=True)
class WebConfig:
    """TLS (None for plain HTTP) and basic-auth users (empty for no auth)."""

    tls: TlsConfig | None = None
    users: dict[str, bytes] = field(default_factory=dict)


class BasicAuth:
    """Checks `Authorization: Basic ...` headers; bcrypt results are cached so scrapes stay cheap."""

    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        self._verified: set[tuple[str, bytes]] = set()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """True when any user is configured."""
        return bool(self._users)

    def check(self, header: str | None) -> bool:
        """True if the header carries a configured user with the right password."""
        if not self._users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self._users.get(user)
        if hashed is None:
            return False
        key = (user, hashlib.sha256(password.encode()).digest())
        with self._lock:
            if key in self._verified:
                return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            self._verified.add(key)
        return True


def _path(base: Path, value: Any, key: str, problems: list[str], where: str) -> Path | None:
    if not isinstance(value, str) or not value:
        problems.append(f"{where}: {key}: must be a file path")
        return None
    path = (base / value) if not Path(value).is_absolute() else Path(value)
    if not path.is_file():
        problems.append(f"{where}: {key}: file not found: {path}")
        return None
    return path


def _parse_tls(raw: Any, base: Path, where: str, problems: list[str]) -> TlsConfig | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: tls_server_config: must be a mapping")
        return None
    for key in sorted(
        set(raw) - {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}
    ):
        problems.append(f"{where}: tls_server_config.{key}: unknown key")
    cert = _path(base, raw.get("cert_file"), "tls_server_config.cert_file", problems, where)
    key = _path(base, raw.get("key_file"), "tls_server_config.key_file", problems, where)
    auth = raw.get("client_auth_type", "NoClientCert")
    if auth not in _CLIENT_AUTH:
        problems.append(f"{where}: tls_server_config.client_auth_type: one of {', '.join(_CLIENT_AUTH)}")
    ca = None
    if "client_ca_file" in raw:
        ca = _path(base, raw["client_ca_file"], "tls_server_config.client_ca_file", problems, where)
    elif auth in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven"):
        problems.append(f"{where}: tls_server_config.client_ca_file: required with client_auth_type {auth}")
    version = raw.get("min_version", "TLS12")
    if version not in _TLS_VERSIONS:
        problems.append(f"{where}: tls_server_config.min_version: one of {', '.join(_TLS_VERSIONS)}")
    if cert is None or key is None or problems:
        return None
    return TlsConfig(cert, key, str(auth), ca, str(version))


def _parse_users(raw: Any, where: str, problems: list[str]) -> dict[str, bytes]:
    if not isinstance(raw, dict):
        problems.append(f"{where}: basic_auth_users: must be a mapping of user to bcrypt hash")
        return {}
    users: dict[str, bytes] = {}
    for user, hashed in raw.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            problems.append(f"{where}: basic_auth_users.{user}: must be a bcrypt hash")
            continue
        users[str(user)] = hashed.replace("$2y$", "$2b$", 1).encode()
    return users


def load_web_config(path: Path) -> WebConfig:
    """Parse and validate a web config file; raise ConfigError listing every problem."""
    where = str(path)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError([f"{where}: cannot read: {exc}"]) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"{where}: must be a mapping"])
    problems = [
        f"{where}: {k}: unknown key" for k in sorted(set(raw) - {"tls_server_config", "basic_auth_users"})
    ]
    tls = None
    if raw.get("tls_server_config") is not None:
        tls = _parse_tls(raw["tls_server_config"], path.parent, where, problems)
    users = _parse_users(raw.get("basic_auth_users") or {}, where, problems)
    if tls is not None:
        try:
            tls.context()
        except (OSError, ssl.SSLError) as exc:
            problems.append(f"{where}: tls_server_config: cannot load certificate or key: {exc}")
    if problems:
        raise ConfigError(problems)
    return WebConfig(tls, users)
