"""The push's part of the exporter's configuration: YAML keys, flags, checks, and `PushSettings` from it.

```yaml
influx:
  url: http://influxdb:8086          # push is on when this is set
  token_file: /etc/ibpool/influx-token
  org: ibpool
  bucket: ibpool
  interval_seconds: 1.0
  batch_size: 5000
  flush_interval_seconds: 1.0
  buffer_points: 100000
  spill: {directory: /var/lib/ibpool/influx-spill, max_bytes: 1073741824}
  retry: {initial_seconds: 1.0, max_seconds: 60.0, exponential_base: 2.0}
  replay_seconds: 30.0               # re-send what was acknowledged this recently when the server goes away
  timeout_seconds: 10.0
  gzip: false
```
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from exporter.influx.settings import PushSettings

# YAML key -> (ExporterConfig field, type); every field has a flag of the same dest.
INFLUX_YAML_KEYS: dict[str, tuple[str, type]] = {
    "influx.url": ("influx_url", str),
    "influx.token_file": ("influx_token_file", Path),
    "influx.org": ("influx_org", str),
    "influx.bucket": ("influx_bucket", str),
    "influx.interval_seconds": ("influx_interval_seconds", float),
    "influx.batch_size": ("influx_batch_size", int),
    "influx.flush_interval_seconds": ("influx_flush_interval_seconds", float),
    "influx.buffer_points": ("influx_buffer_points", int),
    "influx.spill.directory": ("influx_spill_directory", Path),
    "influx.spill.max_bytes": ("influx_spill_max_bytes", int),
    "influx.retry.initial_seconds": ("influx_retry_initial_seconds", float),
    "influx.retry.max_seconds": ("influx_retry_max_seconds", float),
    "influx.retry.exponential_base": ("influx_retry_exponential_base", float),
    "influx.replay_seconds": ("influx_replay_seconds", float),
    "influx.timeout_seconds": ("influx_timeout_seconds", float),
    "influx.gzip": ("influx_gzip", bool),
}

# ExporterConfig field -> PushSettings field
_SETTING_OF = {
    "influx_org": "org",
    "influx_bucket": "bucket",
    "influx_interval_seconds": "interval_seconds",
    "influx_batch_size": "batch_size",
    "influx_flush_interval_seconds": "flush_interval_seconds",
    "influx_buffer_points": "buffer_points",
    "influx_spill_directory": "spill_directory",
    "influx_spill_max_bytes": "spill_max_bytes",
    "influx_retry_initial_seconds": "retry_interval_seconds",
    "influx_retry_max_seconds": "max_retry_delay_seconds",
    "influx_retry_exponential_base": "exponential_base",
    "influx_replay_seconds": "replay_seconds",
    "influx_timeout_seconds": "timeout_seconds",
    "influx_gzip": "gzip",
}


class InfluxFields(Protocol):
    """The push's fields of ExporterConfig."""

    @property
    def influx_url(self) -> str | None: ...
    @property
    def influx_token_file(self) -> Path | None: ...
    @property
    def influx_org(self) -> str: ...
    @property
    def influx_bucket(self) -> str: ...
    @property
    def influx_interval_seconds(self) -> float: ...
    @property
    def influx_batch_size(self) -> int: ...
    @property
    def influx_flush_interval_seconds(self) -> float: ...
    @property
    def influx_buffer_points(self) -> int: ...
    @property
    def influx_spill_directory(self) -> Path | None: ...
    @property
    def influx_spill_max_bytes(self) -> int: ...
    @property
    def influx_retry_initial_seconds(self) -> float: ...
    @property
    def influx_retry_max_seconds(self) -> float: ...
    @property
    def influx_retry_exponential_base(self) -> float: ...
    @property
    def influx_replay_seconds(self) -> float: ...
    @property
    def influx_timeout_seconds(self) -> float: ...
    @property
    def influx_gzip(self) -> bool: ...


def add_influx_flags(parser: argparse.ArgumentParser) -> None:
    """The `--influx.*` flags (every default None, so the YAML file can fill it)."""
    add = parser.add_argument
    add("--influx.url", dest="influx_url", help="push samples to this InfluxDB v2 API (off when unset)")
    add("--influx.token-file", dest="influx_token_file", type=Path, help="file holding the API token")
    add("--influx.org", dest="influx_org", help="organization (InfluxDB 2)")
    add("--influx.bucket", dest="influx_bucket", help="bucket (ibpool)")
    add("--influx.interval-seconds", dest="influx_interval_seconds", type=float, help="sampling interval (1)")
    add("--influx.batch-size", dest="influx_batch_size", type=int, help="points per write (5000)")
    add(
        "--influx.flush-interval-seconds",
        dest="influx_flush_interval_seconds",
        type=float,
        help="send a partial batch after this long (1)",
    )
    add(
        "--influx.buffer-points", dest="influx_buffer_points", type=int, help="points kept in memory (100000)"
    )
    add(
        "--influx.spill-directory",
        dest="influx_spill_directory",
        type=Path,
        help="spill to disk here while the server is down (memory only when unset)",
    )
    add("--influx.spill-max-bytes", dest="influx_spill_max_bytes", type=int, help="disk budget (1 GiB)")
    add(
        "--influx.retry-initial-seconds",
        dest="influx_retry_initial_seconds",
        type=float,
        help="first backoff (1)",
    )
    add(
        "--influx.retry-max-seconds", dest="influx_retry_max_seconds", type=float, help="longest backoff (60)"
    )
    add(
        "--influx.retry-exponential-base",
        dest="influx_retry_exponential_base",
        type=float,
        help="backoff factor (2)",
    )
    add(
        "--influx.replay-seconds",
        dest="influx_replay_seconds",
        type=float,
        help="after a failure, send again what the server acknowledged this recently (30; 0: never)",
    )
    add(
        "--influx.timeout-seconds",
        dest="influx_timeout_seconds",
        type=float,
        help="HTTP timeout per write (10)",
    )
    add("--influx.gzip", dest="influx_gzip", action=argparse.BooleanOptionalAction, help="gzip the writes")


def validate_influx(cfg: InfluxFields, bad: Callable[[str, str], None]) -> None:
    """Report every invalid push setting as `bad(ExporterConfig field, message)`."""
    if cfg.influx_url is None:
        return
    if cfg.influx_token_file is not None and not cfg.influx_token_file.is_file():
        bad("influx_token_file", f"file not found: {cfg.influx_token_file}")
    field_of = {setting: field for field, setting in _SETTING_OF.items()}
    field_of["url"] = "influx_url"
    for setting, message in _settings(cfg, token="").problems():
        bad(field_of.get(setting, f"influx_{setting}"), message)


def push_settings(cfg: InfluxFields) -> PushSettings | None:
    """The push's settings (reading the token file), or None when no URL is configured."""
    if cfg.influx_url is None:
        return None
    token = cfg.influx_token_file.read_text().strip() if cfg.influx_token_file is not None else ""
    return _settings(cfg, token)


def _settings(cfg: InfluxFields, token: str) -> PushSettings:
    assert cfg.influx_url is not None
    values = {setting: getattr(cfg, field) for field, setting in _SETTING_OF.items()}
    return PushSettings(url=cfg.influx_url, token=token, **values)
