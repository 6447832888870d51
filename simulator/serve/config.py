"""`ibpool simulate` configuration: flags over an optional YAML file, parsed once, every problem at once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from foundation.settings import Bad, CommandSettings, Option
from simulator.cluster.errors import SpecError
from simulator.cluster.spec import load_spec
from simulator.serve.presets import PRESETS

DEFAULT_LISTEN = ":9479"


@dataclass(frozen=True)
class SimulateConfig:
    """Everything `ibpool simulate` needs to start."""

    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"  # not served: node, fabric and scheduler pages have their own paths
    log_level: str = "info"
    spec_file: Path | None = None
    preset: str = "small"
    nodes: int | None = None
    seed: int = 1
    start_hour: float = 0.0
    speed: float = 60.0
    trace_file: Path | None = None
    trace_minutes: int | None = None
    warmup_seconds: float = 0.0
    max_nodes: int = 64
    sweep_interval_seconds: float = 1.0
    poll_interval_seconds: float = 1.0
    hca_ports: bool = False
    advertise_address: str | None = None
    workdir: Path | None = None


OPTIONS: tuple[Option, ...] = (
    Option("--spec", "spec", "spec_file", Path, "cluster spec YAML (simulator.cluster.spec)"),
    Option("--preset", "preset", "preset", str,
           f"built-in cluster when no --spec: {', '.join(sorted(PRESETS))} (small)"),
    Option("--nodes", "nodes", "nodes", int, "resize the preset to N nodes"),
    Option("--seed", "seed", "seed", int, "seed of the workload generator and trace replay (1)"),
    Option("--start-hour", "start_hour", "start_hour", float, "hour of day at t=0 of a preset (0)"),
    Option("--speed", "speed", "speed", float, "simulated seconds per wall second; 0 freezes (60)"),
    Option("--trace", "trace", "trace_file", Path, "replay a per-pool minute trace (.csv or .csv.gz)"),
    Option("--trace-minutes", "trace_minutes", "trace_minutes", int, "replay only the first N minutes"),
    Option("--warmup-seconds", "warmup_seconds", "warmup_seconds", float,
           "simulated seconds before serving (0)", hidden=("--warmup",)),
    Option("--max-materialized", "max_materialized", "max_nodes", int, "node exporters at once (64)"),
    Option("--fabric.sweep-interval-seconds", "fabric.sweep_interval_seconds", "sweep_interval_seconds",
           float,
           "seconds between fabric sweeps (1)", hidden=("--sweep-interval",)),
    Option("--slurm.poll-interval-seconds", "slurm.poll_interval_seconds", "poll_interval_seconds", float,
           "seconds between scheduler polls (1)", hidden=("--poll-interval",)),
    Option("--fabric.hca-ports", "fabric.hca_ports", "hca_ports", bool,
           "the fabric exporter reads HCA ports"),
    Option("--advertise-address", "advertise_address", "advertise_address", str,
           "HOST:PORT in /targets (default: the request's Host)"),
    Option("--workdir", "workdir", "workdir", Path, "directory for node trees (a temporary one)"),
)  # fmt: skip


def validate(cfg: SimulateConfig, bad: Bad) -> None:
    """The simulator's own checks (the web ones are shared)."""
    if cfg.preset not in PRESETS:
        bad("preset", f"must be one of {', '.join(sorted(PRESETS))}")
    if cfg.nodes is not None and cfg.nodes < 2:
        bad("nodes", "must be at least 2 (one per pool)")
    if cfg.nodes is not None and (cfg.spec_file or cfg.trace_file):
        bad("nodes", "resizes a preset only (a spec file or a trace sizes the cluster itself)")
    if cfg.speed < 0:
        bad("speed", "must be >= 0")
    if cfg.warmup_seconds < 0:
        bad("warmup_seconds", "must be >= 0")
    if cfg.max_nodes < 1:
        bad("max_nodes", "must be >= 1")
    for name in ("sweep_interval_seconds", "poll_interval_seconds"):
        if getattr(cfg, name) <= 0:
            bad(name, "must be > 0")
    if cfg.trace_minutes is not None and cfg.trace_minutes < 1:
        bad("trace_minutes", "must be >= 1")
    if cfg.trace_file is not None and not cfg.trace_file.is_file():
        bad("trace_file", f"file not found: {cfg.trace_file}")
    if cfg.spec_file is not None:
        try:
            load_spec(cfg.spec_file)
        except (OSError, SpecError) as exc:
            bad("spec_file", str(exc))


SETTINGS = CommandSettings(
    prog="ibpool simulate",
    description="Run a simulated GPU cluster behind the real exporters (docs/simulator.md).",
    config_type=SimulateConfig,
    options=OPTIONS,
    validate=validate,
    default_listen=DEFAULT_LISTEN,
)


load_config = SETTINGS.load
