"""Exporter configuration: Prometheus-style flags over an optional YAML file, parsed once, frozen.

Precedence: built-in defaults < YAML file (`--config.file`) < flags given on the command line.
Every problem is reported at once, each with its file (or `flag`) and key.

```yaml
web:
  listen_address: ":9470"
  config_file: web.yml          # TLS and basic auth (exporter-toolkit format)
  telemetry_path: /metrics
collectors:
  gpu: {enabled: true, deadline_seconds: 2.0}
  infiniband: {enabled: true, sysfs_root: /sys}
  verbs: {enabled: true}
  jobs: {enabled: true, directory: /run/ibpool/jobs}
health:
  max_age_seconds: 300
simulate:
  enabled: false
  gpus: 8
  ports: 8
  seed: 1
  step_seconds: 1.0
influx:                         # optional push to InfluxDB; every key: exporter/influx/config.py
  url: http://influxdb:8086
  spill: {directory: /var/lib/ibpool/influx-spill}
```
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from exporter.errors import ConfigError
from exporter.influx.config import INFLUX_OPTIONS, add_influx_flags, validate_influx
from exporter.settings import Option, add_common_flags, all_yaml_keys, gather_settings, reporter, validate_web

DEFAULT_LISTEN = ":9470"


@dataclass(frozen=True)
class ExporterConfig:
    """Everything the exporter needs to start."""

    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    gpu: bool = True
    gpu_deadline_seconds: float = 2.0
    infiniband: bool = True
    sysfs_root: Path = Path("/sys")
    verbs: bool = True
    jobs: bool = True
    jobs_directory: Path = Path("/run/ibpool/jobs")
    health_max_age_seconds: float = 300.0
    simulate: bool = False
    simulate_gpus: int = 8
    simulate_ports: int = 8
    simulate_seed: int = 1
    simulate_step_seconds: float = 1.0
    influx_url: str | None = None
    influx_token_file: Path | None = None
    influx_org: str = ""
    influx_bucket: str = "ibpool"
    influx_interval_seconds: float = 1.0
    influx_batch_size: int = 5000
    influx_flush_interval_seconds: float = 1.0
    influx_buffer_points: int = 100_000
    influx_spill_directory: Path | None = None
    influx_spill_max_bytes: int = 1 << 30
    influx_retry_initial_seconds: float = 1.0
    influx_retry_max_seconds: float = 60.0
    influx_retry_exponential_base: float = 2.0
    influx_replay_seconds: float = 30.0
    influx_timeout_seconds: float = 10.0
    influx_gzip: bool = False
    log_level: str = "info"


# The node exporter's own options: flag, YAML key (nested keys are dotted), field, type, help.
_OPTIONS: tuple[Option, ...] = (
    Option("--collector.gpu", "collectors.gpu.enabled", "gpu", bool, "NVML GPU metrics"),
    Option("--gpu.deadline-seconds", "collectors.gpu.deadline_seconds", "gpu_deadline_seconds", float,
           "NVML deadline per scrape"),
    Option("--collector.infiniband", "collectors.infiniband.enabled", "infiniband", bool,
           "InfiniBand port metrics from sysfs"),
    Option("--sysfs-root", "collectors.infiniband.sysfs_root", "sysfs_root", Path, "sysfs mount point (/sys)",
           aliases=("--path.sysfs",)),
    Option("--collector.verbs", "collectors.verbs.enabled", "verbs", bool,
           "MTU from verbs (pyverbs), when it imports and finds devices"),
    Option("--collector.jobs", "collectors.jobs.enabled", "jobs", bool, "GPU-to-job attribution"),
    Option("--jobs.directory", "collectors.jobs.directory", "jobs_directory", Path,
           "job mapping directory (/run/ibpool/jobs)"),
    Option("--health.max-age-seconds", "health.max_age_seconds", "health_max_age_seconds", float,
           "/healthz collects again when the last collection is older than this"),
    Option("--simulate", "simulate.enabled", "simulate", bool,
           "serve a simulated node (8 GPUs, 8 NDR ports) instead of the hardware"),
    Option("--simulate.gpus", "simulate.gpus", "simulate_gpus", int),
    Option("--simulate.ports", "simulate.ports", "simulate_ports", int),
    Option("--simulate.seed", "simulate.seed", "simulate_seed", int),
    Option("--simulate.step-seconds", "simulate.step_seconds", "simulate_step_seconds", float),
)  # fmt: skip
# key in the YAML file -> (field, type); nested keys are dotted.
_YAML_KEYS: dict[str, tuple[str, type]] = all_yaml_keys(_OPTIONS, INFLUX_OPTIONS)
_FLAG_FIELDS = tuple(field for field, _ in _YAML_KEYS.values())  # each flag's dest is its field


def build_parser(prog: str = "ibpool exporter") -> argparse.ArgumentParser:
    """The exporter's command-line flags (every default is None so the YAML file can fill it)."""
    p = argparse.ArgumentParser(prog=prog, description="Node exporter for NVIDIA GPUs and InfiniBand ports.")
    add_common_flags(p, DEFAULT_LISTEN, _OPTIONS)
    add_influx_flags(p)
    return p


def _validate(cfg: ExporterConfig, origin: dict[str, str], problems: list[str]) -> None:
    bad = reporter(origin, problems)
    validate_web(cfg, bad)
    if cfg.gpu_deadline_seconds <= 0:
        bad("gpu_deadline_seconds", "must be > 0")
    if cfg.health_max_age_seconds <= 0:
        bad("health_max_age_seconds", "must be > 0")
    if not cfg.simulate and cfg.infiniband and not cfg.sysfs_root.is_dir():
        bad("sysfs_root", f"not a directory: {cfg.sysfs_root}")
    if not 1 <= cfg.simulate_gpus <= 64:
        bad("simulate_gpus", "must be between 1 and 64")
    if not 1 <= cfg.simulate_ports <= 64:
        bad("simulate_ports", "must be between 1 and 64")
    if cfg.simulate_step_seconds <= 0:
        bad("simulate_step_seconds", "must be > 0")
    validate_influx(cfg, bad)


def load_config(argv: list[str]) -> ExporterConfig:
    """Parse flags and the optional YAML file into one frozen config; raise ConfigError with all problems."""
    args = build_parser().parse_args(argv)
    problems: list[str] = []
    values, origin = gather_settings(args, _YAML_KEYS, _FLAG_FIELDS, problems)
    cfg = ExporterConfig(**values)
    _validate(cfg, origin, problems)
    if problems:
        raise ConfigError(problems)
    return cfg
