"""Scheduler exporter configuration: Prometheus-style flags over an optional YAML file, parsed once, frozen.

Precedence: built-in defaults < YAML file (`--config.file`) < flags given on the command line. Every
problem is reported at once, each with its file (or `flag`) and key.

```yaml
web:
  listen_address: ":9472"
  config_file: web.yml            # TLS and basic auth (exporter-toolkit format)
  telemetry_path: /metrics
slurm:
  bin_dir: /usr/bin               # where sinfo, squeue and scontrol are (default: PATH)
  conf: /etc/slurm/slurm.conf     # passed to them as SLURM_CONF (default: Slurm's own default)
  poll_interval_seconds: 15
  timeout_seconds: 10             # per command; the command is killed when it runs longer
  max_age_seconds: 60             # pool series are dropped when the last good poll is older
  gpus_per_node: 8                # used only when no node advertises GPUs in its GRES
  gres_name: gpu
log:
  level: info
```
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from exporter.errors import ConfigError
from exporter.settings import WEB_YAML_KEYS, add_common_flags, gather_settings, reporter, validate_web

DEFAULT_LISTEN = ":9472"
COMMANDS_PER_POLL = 3
_GRES_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")


@dataclass(frozen=True)
class SchedulerExporterConfig:
    """Everything the scheduler exporter needs to start."""

    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    slurm_bin_dir: Path | None = None
    slurm_conf: Path | None = None
    poll_interval_seconds: float = 15.0
    timeout_seconds: float = 10.0
    max_age_seconds: float = 60.0
    gpus_per_node: int | None = None
    gres_name: str = "gpu"
    log_level: str = "info"


# key in the YAML file -> (field, type); nested keys are dotted.
_YAML_KEYS: dict[str, tuple[str, type]] = {
    **WEB_YAML_KEYS,
    "slurm.bin_dir": ("slurm_bin_dir", Path),
    "slurm.conf": ("slurm_conf", Path),
    "slurm.poll_interval_seconds": ("poll_interval_seconds", float),
    "slurm.timeout_seconds": ("timeout_seconds", float),
    "slurm.max_age_seconds": ("max_age_seconds", float),
    "slurm.gpus_per_node": ("gpus_per_node", int),
    "slurm.gres_name": ("gres_name", str),
}
_FLAG_FIELDS = tuple(field for field, _ in _YAML_KEYS.values())


def build_parser(prog: str = "ibpool scheduler-exporter") -> argparse.ArgumentParser:
    """The command-line flags (every default is None so that the YAML file can fill it)."""
    p = argparse.ArgumentParser(
        prog=prog, description="Slurm pools (partitions): GPUs, queues and node states, for Prometheus."
    )
    add = p.add_argument
    add_common_flags(p, DEFAULT_LISTEN)
    add(
        "--slurm.bin-dir", dest="slurm_bin_dir", type=Path, help="directory of sinfo, squeue, scontrol (PATH)"
    )
    add("--slurm.conf", dest="slurm_conf", type=Path, help="slurm.conf for the commands (sets SLURM_CONF)")
    add(
        "--slurm.poll-interval-seconds",
        dest="poll_interval_seconds",
        type=float,
        help="seconds between polls (15)",
    )
    add(
        "--slurm.timeout-seconds",
        dest="timeout_seconds",
        type=float,
        help="timeout per command, then kill (10)",
    )
    add(
        "--slurm.max-age-seconds",
        dest="max_age_seconds",
        type=float,
        help="drop pool series when the last good poll is older (60)",
    )
    add(
        "--slurm.gpus-per-node",
        dest="gpus_per_node",
        type=int,
        help="GPUs per node when no node has GPU GRES (default: GPU figures omitted then)",
    )
    add("--slurm.gres-name", dest="gres_name", help="GRES name that counts as a GPU (gpu)")
    return p


def _validate(cfg: SchedulerExporterConfig, origin: dict[str, str], problems: list[str]) -> None:
    bad = reporter(origin, problems)
    validate_web(cfg, bad)
    if cfg.slurm_bin_dir is not None and not cfg.slurm_bin_dir.is_dir():
        bad("slurm_bin_dir", f"not a directory: {cfg.slurm_bin_dir}")
    if cfg.slurm_conf is not None and not cfg.slurm_conf.is_file():
        bad("slurm_conf", f"file not found: {cfg.slurm_conf}")
    if cfg.poll_interval_seconds <= 0:
        bad("poll_interval_seconds", "must be > 0")
    if cfg.timeout_seconds <= 0:
        bad("timeout_seconds", "must be > 0")
    longest_gap = cfg.poll_interval_seconds + COMMANDS_PER_POLL * cfg.timeout_seconds
    if cfg.max_age_seconds < longest_gap:
        bad(
            "max_age_seconds",
            f"must be at least poll_interval_seconds + {COMMANDS_PER_POLL} x timeout_seconds "
            f"({longest_gap:g}), or healthy data would be dropped between polls",
        )
    if cfg.gpus_per_node is not None and not 1 <= cfg.gpus_per_node <= 1024:
        bad("gpus_per_node", "must be between 1 and 1024")
    if not _GRES_NAME.match(cfg.gres_name):
        bad("gres_name", f"not a GRES name: {cfg.gres_name!r}")


def load_config(argv: list[str]) -> SchedulerExporterConfig:
    """Parse flags and the optional YAML file into one frozen config; raise ConfigError with all problems."""
    args = build_parser().parse_args(argv)
    problems: list[str] = []
    values, origin = gather_settings(args, _YAML_KEYS, _FLAG_FIELDS, problems)
    cfg = SchedulerExporterConfig(**values)
    _validate(cfg, origin, problems)
    if problems:
        raise ConfigError(problems)
    return cfg
