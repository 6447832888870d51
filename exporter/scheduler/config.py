"""Scheduler exporter configuration: Prometheus-style flags over an optional YAML file, parsed once, frozen.

Precedence: built-in defaults < YAML file (`--config.file`) < flags given on the command line. Every
problem is reported at once, each with its file (or `flag`) and key. Every YAML key, in a full example:
docs/configuration.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from foundation.settings import Bad, CommandSettings, Option

DEFAULT_LISTEN = ":9472"
COMMANDS_PER_POLL = 3
_GRES_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


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


# How every command that reads Slurm finds and runs its clients (the scheduler exporter, `ibpool targets`).
SLURM_CLIENT_OPTIONS: tuple[Option, ...] = (
    Option("--slurm.bin-dir", "slurm.bin_dir", "slurm_bin_dir", Path,
           "directory of sinfo, squeue, scontrol (PATH)"),
    Option("--slurm.conf", "slurm.conf", "slurm_conf", Path, "slurm.conf for the commands (sets SLURM_CONF)"),
    Option("--slurm.timeout-seconds", "slurm.timeout_seconds", "timeout_seconds", float,
           "timeout per command, then kill (10)"),
    Option("--slurm.gres-name", "slurm.gres_name", "gres_name", str, "GRES name that counts as a GPU (gpu)"),
)  # fmt: skip

# The scheduler exporter's own options: flag, YAML key (nested keys are dotted), field, type, help.
OPTIONS: tuple[Option, ...] = (
    *SLURM_CLIENT_OPTIONS,
    Option("--slurm.poll-interval-seconds", "slurm.poll_interval_seconds", "poll_interval_seconds", float,
           "seconds between polls (15)"),
    Option("--slurm.max-age-seconds", "slurm.max_age_seconds", "max_age_seconds", float,
           "drop pool series when the last good poll is older (60)"),
    Option("--slurm.gpus-per-node", "slurm.gpus_per_node", "gpus_per_node", int,
           "GPUs per node when no node has GPU GRES (default: GPU figures omitted then)"),
)  # fmt: skip


class SlurmClientSettings(Protocol):
    """The fields of SLURM_CLIENT_OPTIONS."""

    @property
    def slurm_bin_dir(self) -> Path | None: ...
    @property
    def slurm_conf(self) -> Path | None: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def gres_name(self) -> str: ...


def validate_slurm_client(cfg: SlurmClientSettings, bad: Bad) -> None:
    """Checks of SLURM_CLIENT_OPTIONS."""
    if cfg.slurm_bin_dir is not None and not cfg.slurm_bin_dir.is_dir():
        bad("slurm_bin_dir", f"not a directory: {cfg.slurm_bin_dir}")
    if cfg.slurm_conf is not None and not cfg.slurm_conf.is_file():
        bad("slurm_conf", f"file not found: {cfg.slurm_conf}")
    if cfg.timeout_seconds <= 0:
        bad("timeout_seconds", "must be > 0")
    if not _GRES_NAME.fullmatch(cfg.gres_name):
        bad("gres_name", f"not a GRES name: {cfg.gres_name!r}")


def validate(cfg: SchedulerExporterConfig, bad: Bad) -> None:
    """The scheduler exporter's own checks (the web ones are shared)."""
    validate_slurm_client(cfg, bad)
    if cfg.poll_interval_seconds <= 0:
        bad("poll_interval_seconds", "must be > 0")
    longest_gap = cfg.poll_interval_seconds + COMMANDS_PER_POLL * cfg.timeout_seconds
    if cfg.max_age_seconds < longest_gap:
        bad(
            "max_age_seconds",
            f"must be at least poll_interval_seconds + {COMMANDS_PER_POLL} x timeout_seconds "
            f"({longest_gap:g}), or healthy data would be dropped between polls",
        )
    if cfg.gpus_per_node is not None and not 1 <= cfg.gpus_per_node <= 1024:
        bad("gpus_per_node", "must be between 1 and 1024")


SETTINGS = CommandSettings(
    prog="ibpool scheduler-exporter",
    description="Slurm pools (partitions): GPUs, queues and node states, for Prometheus.",
    config_type=SchedulerExporterConfig,
    options=OPTIONS,
    validate=validate,
    default_listen=DEFAULT_LISTEN,
)


load_config = SETTINGS.load
