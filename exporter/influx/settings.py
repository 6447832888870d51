"""What the InfluxDB push needs, as one frozen object: the `influx` section of the exporter's config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exporter.influx.target_labels import Labels, parse


@dataclass(frozen=True)
class PushSettings:
    """Server, sampling, batching, buffering and retry settings of the push (off while `url` is empty).

    `token` is read from `token_file` and `target_labels` resolved from `labels` (over the defaults) when the
    push starts (`exporter.influx.config.push_settings`)."""

    url: str = ""
    bucket: str = "ibpool"
    org: str = ""
    token_file: Path | None = None
    token: str = ""
    interval_seconds: float = 1.0
    batch_size: int = 5000
    flush_interval_seconds: float = 1.0
    buffer_points: int = 100_000
    spill_directory: Path | None = None
    spill_max_bytes: int = 1 << 30
    spill_segment_bytes: int = 8 << 20
    retry_initial_seconds: float = 1.0
    retry_max_seconds: float = 60.0
    retry_exponential_base: float = 2.0
    jitter: float = 0.2
    replay_seconds: float = 30.0
    timeout_seconds: float = 10.0
    gzip: bool = False
    drain_seconds: float = 5.0
    labels: str = ""
    target_labels: Labels = ()

    def problems(self) -> list[tuple[str, str]]:
        """(field, message) for every invalid value."""
        out: list[tuple[str, str]] = []
        out.extend(("labels", problem) for problem in parse(self.labels)[1])
        if self.token_file is not None and not self.token_file.is_file():
            out.append(("token_file", f"file not found: {self.token_file}"))
        if not self.url.startswith(("http://", "https://")):
            out.append(("url", "must start with http:// or https://"))
        if not self.bucket:
            out.append(("bucket", "must not be empty"))
        positive = {
            "interval_seconds": self.interval_seconds,
            "flush_interval_seconds": self.flush_interval_seconds,
            "retry_initial_seconds": self.retry_initial_seconds,
            "timeout_seconds": self.timeout_seconds,
            "batch_size": self.batch_size,
            "buffer_points": self.buffer_points,
            "spill_max_bytes": self.spill_max_bytes,
            "spill_segment_bytes": self.spill_segment_bytes,
        }
        out.extend((name, "must be > 0") for name, value in positive.items() if value <= 0)
        if 0 < self.interval_seconds < 0.01:
            out.append(("interval_seconds", "must be >= 0.01 (points of one series need distinct ms stamps)"))
        if self.retry_max_seconds < self.retry_initial_seconds:
            out.append(("retry_max_seconds", "must be >= the first retry interval"))
        if self.replay_seconds < 0:
            out.append(("replay_seconds", "must be >= 0 (0: no replay)"))
        if self.retry_exponential_base < 1:
            out.append(("retry_exponential_base", "must be >= 1"))
        if self.buffer_points < self.batch_size:
            out.append(("buffer_points", "must be >= batch_size"))
        return out
