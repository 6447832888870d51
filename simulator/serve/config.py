"""`ibpool simulate` flags, parsed once into a frozen config; every problem reported at once."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from foundation.errors import ConfigError
from foundation.logs import LOG_LEVELS
from foundation.settings import reporter, validate_web
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


def build_parser(prog: str = "ibpool simulate") -> argparse.ArgumentParser:
    """The command-line flags."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run a simulated GPU cluster behind the real exporters (see simulator.serve).",
    )
    add = p.add_argument
    add("--spec", dest="spec_file", type=Path, help="cluster spec YAML (simulator.cluster.spec)")
    add("--preset", choices=sorted(PRESETS), default="small", help="built-in cluster when no --spec (small)")
    add("--nodes", type=int, help="resize the preset to N nodes")
    add("--seed", type=int, default=1, help="seed of the workload generator and trace replay (1)")
    add("--start-hour", dest="start_hour", type=float, default=0.0, help="hour of day at t=0 of a preset (0)")
    add("--speed", type=float, default=60.0, help="simulated seconds per wall second; 0 freezes (60)")
    add("--trace", dest="trace_file", type=Path, help="replay a per-pool minute trace (.csv or .csv.gz)")
    add("--trace-minutes", dest="trace_minutes", type=int, help="replay only the first N minutes")
    add("--warmup", dest="warmup_seconds", type=float, default=0.0, help="simulated seconds before serving")
    add("--max-materialized", dest="max_nodes", type=int, default=64, help="node exporters at once (64)")
    add("--sweep-interval", dest="sweep_interval_seconds", type=float, default=1.0, help="fabric (1 s)")
    add("--poll-interval", dest="poll_interval_seconds", type=float, default=1.0, help="scheduler (1 s)")
    add("--fabric.hca-ports", dest="hca_ports", action="store_true", help="fabric exporter reads HCA ports")
    add("--advertise-address", dest="advertise_address", help="HOST:PORT in /targets (the request's Host)")
    add("--workdir", type=Path, help="directory for node trees (a temporary one)")
    add("--web.listen-address", dest="listen_address", default=DEFAULT_LISTEN, help=f"({DEFAULT_LISTEN})")
    add("--web.config.file", dest="web_config_file", type=Path, help="TLS / basic auth (exporter-toolkit)")
    add("--log.level", dest="log_level", default="info", help=", ".join(LOG_LEVELS))
    return p


def _validate(cfg: SimulateConfig, given: set[str], problems: list[str]) -> None:
    bad = reporter(dict.fromkeys(given, "flag"), problems)
    validate_web(cfg, bad)
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


def load_config(argv: list[str]) -> SimulateConfig:
    """Parse the flags into one frozen config; raise ConfigError listing every problem."""
    args = build_parser().parse_args(argv)
    cfg = SimulateConfig(**vars(args))
    given = {key for key, value in vars(args).items() if value is not None}
    problems: list[str] = []
    _validate(cfg, given, problems)
    if problems:
        raise ConfigError(problems)
    return cfg
