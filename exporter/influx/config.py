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
from exporter.settings import Option, add_options, yaml_keys

# Every push option: flag, YAML key, ExporterConfig field, type, help.
INFLUX_OPTIONS: tuple[Option, ...] = (
    Option("--influx.url", "influx.url", "influx_url", str,
           "push samples to this InfluxDB v2 API (off when unset)"),
    Option("--influx.token-file", "influx.token_file", "influx_token_file", Path,
           "file holding the API token"),
    Option("--influx.org", "influx.org", "influx_org", str, "organization (InfluxDB 2)"),
    Option("--influx.bucket", "influx.bucket", "influx_bucket", str, "bucket (ibpool)"),
    Option("--influx.interval-seconds", "influx.interval_seconds", "influx_interval_seconds", float,
           "sampling interval (1)"),
    Option("--influx.batch-size", "influx.batch_size", "influx_batch_size", int, "points per write (5000)"),
    Option("--influx.flush-interval-seconds", "influx.flush_interval_seconds",
           "influx_flush_interval_seconds", float, "send a partial batch after this long (1)"),
    Option("--influx.buffer-points", "influx.buffer_points", "influx_buffer_points", int,
           "points kept in memory (100000)"),
    Option("--influx.spill-directory", "influx.spill.directory", "influx_spill_directory", Path,
           "spill to disk here while the server is down (memory only when unset)"),
    Option("--influx.spill-max-bytes", "influx.spill.max_bytes", "influx_spill_max_bytes", int,
           "disk budget (1 GiB)"),
    Option("--influx.retry-initial-seconds", "influx.retry.initial_seconds", "influx_retry_initial_seconds",
           float, "first backoff (1)"),
    Option("--influx.retry-max-seconds", "influx.retry.max_seconds", "influx_retry_max_seconds", float,
           "longest backoff (60)"),
    Option("--influx.retry-exponential-base", "influx.retry.exponential_base",
           "influx_retry_exponential_base", float, "backoff factor (2)"),
    Option("--influx.replay-seconds", "influx.replay_seconds", "influx_replay_seconds", float,
           "after a failure, send again what the server acknowledged this recently (30; 0: never)"),
    Option("--influx.timeout-seconds", "influx.timeout_seconds", "influx_timeout_seconds", float,
           "HTTP timeout per write (10)"),
    Option("--influx.gzip", "influx.gzip", "influx_gzip", bool, "gzip the writes"),
)  # fmt: skip
# YAML key -> (ExporterConfig field, type); every field has a flag of the same dest.
INFLUX_YAML_KEYS: dict[str, tuple[str, type]] = yaml_keys(INFLUX_OPTIONS)

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
    add_options(parser, INFLUX_OPTIONS)


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
