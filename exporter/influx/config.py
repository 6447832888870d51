"""The push's part of the exporter's configuration: the `influx` options, and `PushSettings` from them.

Every key with its default, in one example: docs/configuration.md, "The InfluxDB push (`influx`)".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from exporter.influx import target_labels
from exporter.influx.settings import PushSettings
from foundation.settings import Bad, Option

# Every push option: flag, YAML key, field of the config's `influx` section (PushSettings), type, help.
INFLUX_OPTIONS: tuple[Option, ...] = (
    Option("--influx.url", "influx.url", "influx.url", str,
           "push samples to this InfluxDB v2 API (off when unset)"),
    Option("--influx.token-file", "influx.token_file", "influx.token_file", Path,
           "file holding the API token"),
    Option("--influx.org", "influx.org", "influx.org", str, "organization (InfluxDB 2)"),
    Option("--influx.bucket", "influx.bucket", "influx.bucket", str, "bucket (ibpool)"),
    Option("--influx.interval-seconds", "influx.interval_seconds", "influx.interval_seconds", float,
           "sampling interval (1)"),
    Option("--influx.batch-size", "influx.batch_size", "influx.batch_size", int, "points per write (5000)"),
    Option("--influx.flush-interval-seconds", "influx.flush_interval_seconds",
           "influx.flush_interval_seconds", float, "send a partial batch after this long (1)"),
    Option("--influx.buffer-points", "influx.buffer_points", "influx.buffer_points", int,
           "points kept in memory (100000)"),
    Option("--influx.spill-directory", "influx.spill.directory", "influx.spill_directory", Path,
           "spill to disk here while the server is down (memory only when unset)"),
    Option("--influx.spill-max-bytes", "influx.spill.max_bytes", "influx.spill_max_bytes", int,
           "disk budget (1 GiB)"),
    Option("--influx.retry-initial-seconds", "influx.retry.initial_seconds", "influx.retry_initial_seconds",
           float, "first backoff (1)"),
    Option("--influx.retry-max-seconds", "influx.retry.max_seconds", "influx.retry_max_seconds", float,
           "longest backoff (60)"),
    Option("--influx.retry-exponential-base", "influx.retry.exponential_base",
           "influx.retry_exponential_base", float, "backoff factor (2)"),
    Option("--influx.replay-seconds", "influx.replay_seconds", "influx.replay_seconds", float,
           "after a failure, send again what the server acknowledged this recently (30; 0: never)"),
    Option("--influx.timeout-seconds", "influx.timeout_seconds", "influx.timeout_seconds", float,
           "HTTP timeout per write (10)"),
    Option("--influx.gzip", "influx.gzip", "influx.gzip", bool, "gzip the writes"),
    Option("--influx.labels", "influx.labels", "influx.labels", str,
           "k=v,... added to every point as a scrape's target labels (defaults: job=ibpool-node, "
           "instance and node the short host name; k= leaves one out)"),
)  # fmt: skip


def validate_influx(settings: PushSettings, bad: Bad) -> None:
    """Report every invalid push setting as `bad("influx.FIELD", message)` (nothing while push is off)."""
    if not settings.url:
        return
    for name, message in settings.problems():
        bad(f"influx.{name}", message)


def push_settings(settings: PushSettings) -> PushSettings | None:
    """The push's settings with the token read from its file and the target labels resolved (over the
    defaults, `exporter.influx.target_labels`), or None when no URL is configured."""
    if not settings.url:
        return None
    token = settings.token_file.read_text().strip() if settings.token_file is not None else settings.token
    given, _ = target_labels.parse(settings.labels)
    labels = target_labels.with_defaults(given, target_labels.short_hostname())
    return dataclasses.replace(settings, token=token, target_labels=labels)
