"""Exporter configuration: Prometheus-style flags over an optional YAML file, parsed once, frozen.

Precedence: built-in defaults < YAML file (`--config.file`) < flags given on the command line. Every
problem is reported at once, each with its file (or `flag`) and key. Every YAML key, in a full example:
docs/configuration.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from exporter.influx.config import INFLUX_OPTIONS, validate_influx
from exporter.influx.settings import PushSettings
from foundation.settings import Bad, CommandSettings, Option

DEFAULT_LISTEN = ":9470"


@dataclass(frozen=True)
class ExporterConfig:
    """Everything the exporter needs to start."""

    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    gpu: bool = True
    gpu_deadline_seconds: float = 2.0
    gpu_sample_interval_seconds: float = 1.0
    gpu_slow_sample_interval_seconds: float = 10.0
    infiniband: bool = True
    sysfs_root: Path = Path("/sys")
    infiniband_mirror: bool = True
    verbs: bool = True
    jobs: bool = True
    jobs_directory: Path = Path("/run/ibpool/jobs")
    health_max_age_seconds: float = 300.0
    influx: PushSettings = field(default_factory=PushSettings)
    log_level: str = "info"


# The node exporter's own options: flag, YAML key (nested keys are dotted), field, type, help.
OPTIONS: tuple[Option, ...] = (
    Option("--collector.gpu", "collectors.gpu.enabled", "gpu", bool, "NVML GPU metrics"),
    Option("--gpu.deadline-seconds", "collectors.gpu.deadline_seconds", "gpu_deadline_seconds", float,
           "a GPU whose NVML read takes longer is stale (up 0); also the gpu collector's scrape deadline"),
    Option("--gpu.sample-interval-seconds", "collectors.gpu.sample_interval_seconds",
           "gpu_sample_interval_seconds", float,
           "read each GPU in the background this often, serve the latest snapshot (0: at each scrape)"),
    Option("--gpu.slow-sample-interval-seconds", "collectors.gpu.slow_sample_interval_seconds",
           "gpu_slow_sample_interval_seconds", float,
           "how often to read the costly, slow-moving values (energy, ECC, remapped rows, violations, PCIe)"),
    Option("--collector.infiniband", "collectors.infiniband.enabled", "infiniband", bool,
           "InfiniBand port metrics from sysfs"),
    Option("--sysfs-root", "collectors.infiniband.sysfs_root", "sysfs_root", Path, "sysfs mount point (/sys)",
           aliases=("--path.sysfs",)),
    Option("--collector.infiniband.mirror", "collectors.infiniband.mirror", "infiniband_mirror", bool,
           "also serve the families node_exporter's infiniband collector has (off: only what it lacks)"),
    Option("--collector.verbs", "collectors.verbs.enabled", "verbs", bool,
           "MTU from verbs (pyverbs), when it imports and finds devices"),
    Option("--collector.jobs", "collectors.jobs.enabled", "jobs", bool, "GPU-to-job attribution"),
    Option("--jobs.directory", "collectors.jobs.directory", "jobs_directory", Path,
           "job mapping directory (/run/ibpool/jobs)"),
    Option("--health.max-age-seconds", "health.max_age_seconds", "health_max_age_seconds", float,
           "/healthz collects again when the last collection is older than this"),
    *INFLUX_OPTIONS,
)  # fmt: skip


def validate(cfg: ExporterConfig, bad: Bad) -> None:
    """The node exporter's own checks (the web ones are shared)."""
    if cfg.gpu_deadline_seconds <= 0:
        bad("gpu_deadline_seconds", "must be > 0")
    if cfg.gpu_sample_interval_seconds < 0:
        bad("gpu_sample_interval_seconds", "must be >= 0 (0 reads the GPUs at each scrape)")
    if cfg.gpu_slow_sample_interval_seconds < cfg.gpu_sample_interval_seconds:
        bad("gpu_slow_sample_interval_seconds", "must be >= gpu_sample_interval_seconds")
    if cfg.health_max_age_seconds <= 0:
        bad("health_max_age_seconds", "must be > 0")
    if cfg.infiniband and not cfg.sysfs_root.is_dir():
        bad("sysfs_root", f"not a directory: {cfg.sysfs_root}")
    validate_influx(cfg.influx, bad)


SETTINGS = CommandSettings(
    prog="ibpool exporter",
    description="Node exporter for NVIDIA GPUs and InfiniBand ports.",
    config_type=ExporterConfig,
    options=OPTIONS,
    validate=validate,
    default_listen=DEFAULT_LISTEN,
)


load_config = SETTINGS.load
