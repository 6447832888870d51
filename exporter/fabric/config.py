"""Fabric exporter configuration: Prometheus-style flags over an optional YAML file, parsed once, frozen.

Precedence: built-in defaults < YAML file (`--config.file`) < flags given on the command line. Every
problem is reported at once, each with its file (or `flag`) and key. Every YAML key, in a full example:
docs/configuration.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.fabric.errors import NameMapError
from exporter.fabric.names import load_name_map
from exporter.fabric.sweep import VL_MODES, VlMode
from exporter.fabric.vlarb_read import VLARB_MODES, VlarbMode
from foundation.settings import Bad, CommandSettings, Option

DEFAULT_LISTEN = ":9471"


@dataclass(frozen=True)
class FabricConfig:
    """Everything the fabric exporter needs to start."""

    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    sweep_interval_seconds: float = 15.0
    concurrency: int = 4
    command_timeout_seconds: float = 10.0
    hca_ports: bool = False
    vl_counters: VlMode = "batch"
    vl_count: int = 16
    port_states: bool = True
    vlarb_ports: VlarbMode = "first"
    routes_interval_seconds: float = 300.0
    node_name_map: Path | None = None
    forget_after_seconds: float = 3600.0
    scratch_dir: Path | None = None
    ibdiag_ca: str | None = None
    ibdiag_port: int | None = None
    ibdiag_timeout_ms: int | None = None
    ibdiag_bin_dir: Path | None = None
    health_max_age_seconds: float = 300.0
    log_level: str = "info"


# The fabric exporter's own options: flag, YAML key (nested keys are dotted), field, type, help.
OPTIONS: tuple[Option, ...] = (
    Option("--fabric.sweep-interval-seconds", "fabric.sweep_interval_seconds", "sweep_interval_seconds",
           float,
           "seconds between sweeps (15)", hidden=("--fabric.sweep-interval",)),
    Option("--fabric.concurrency", "fabric.concurrency", "concurrency", int,
           "diagnostics running at once (4)"),
    Option("--fabric.command-timeout-seconds", "fabric.command_timeout_seconds", "command_timeout_seconds",
           float,
           "seconds one diagnostic may run before it is killed (10)", hidden=("--fabric.command-timeout",)),
    Option("--fabric.hca-ports", "fabric.hca_ports", "hca_ports", bool, "also read HCA ports (off)"),
    Option("--fabric.vl-counters", "fabric.vl_counters", "vl_counters", str,
           "per-VL waits: batch, perfquery or off (batch)"),
    Option("--fabric.vl-count", "fabric.vl_count", "vl_count", int,
           "export VLs 0..N-1 (16: all the PMA returns)"),
    Option("--fabric.port-states", "fabric.port_states", "port_states", bool,
           "port states from iblinkinfo (on)"),
    Option("--fabric.vlarb-ports", "fabric.vlarb_ports", "vlarb_ports", str,
           "VL arbitration tables (smpquery vlarb, one process per port): off, first (one active port per"
           " switch) or all (every active switch port) (first)"),
    Option("--fabric.routes-interval-seconds", "fabric.routes_interval_seconds", "routes_interval_seconds",
           float,
           "seconds between reads of every switch's forwarding table (ibroute, one process per switch;"
           " also read when the LIDs change); 0: never (300)"),
    Option("--fabric.node-name-map", "fabric.node_name_map", "node_name_map", Path, "GUID-to-name map file"),
    Option("--fabric.forget-after-seconds", "fabric.forget_after_seconds", "forget_after_seconds", float,
           "seconds a switch missing from discovery is still reported down (3600)",
           hidden=("--fabric.forget-after",)),
    Option("--fabric.scratch-dir", "fabric.scratch_dir", "scratch_dir", Path,
           "directory the diagnostics run in (default: /dev/shm, else TMPDIR)"),
    Option("--ibdiag.ca", "ibdiag.ca", "ibdiag_ca", str, "local CA the diagnostics use (-C)"),
    Option("--ibdiag.port", "ibdiag.port", "ibdiag_port", int, "local CA port the diagnostics use (-P)"),
    Option("--ibdiag.timeout-ms", "ibdiag.timeout_ms", "ibdiag_timeout_ms", int, "MAD timeout in ms (-t)",
           hidden=("--ibdiag.timeout",)),
    Option("--ibdiag.bin-dir", "ibdiag.bin_dir", "ibdiag_bin_dir", Path, "directory holding perfquery & co."),
    Option("--health.max-age-seconds", "health.max_age_seconds", "health_max_age_seconds", float,
           "fabric data older than this (the last complete sweep, or the topology it used) is not"
           " served: the fabric collector fails and /healthz fails (300)"),
)  # fmt: skip


def _normalise(flat: dict[str, Any]) -> None:
    for key in ("fabric.vl_counters", "fabric.vlarb_ports"):
        if flat.get(key) is False:
            flat[key] = "off"  # YAML 1.1 reads a bare `off` as false


def validate(cfg: FabricConfig, bad: Bad) -> None:
    """The fabric exporter's own checks (the web ones are shared)."""
    for name in ("sweep_interval_seconds", "command_timeout_seconds", "health_max_age_seconds"):
        if not getattr(cfg, name) > 0:
            bad(name, "must be > 0")
    for name in ("forget_after_seconds", "routes_interval_seconds"):
        if not getattr(cfg, name) >= 0:
            bad(name, "must be >= 0")
    if not 1 <= cfg.concurrency <= 64:
        bad("concurrency", "must be between 1 and 64")
    if cfg.vl_counters not in VL_MODES:
        bad("vl_counters", f"must be one of {', '.join(VL_MODES)}")
    if cfg.vlarb_ports not in VLARB_MODES:
        bad("vlarb_ports", f"must be one of {', '.join(VLARB_MODES)}")
    if not 1 <= cfg.vl_count <= 16:
        bad("vl_count", "must be between 1 and 16")
    if cfg.ibdiag_port is not None and not 0 <= cfg.ibdiag_port <= 255:
        bad("ibdiag_port", "must be between 0 and 255")
    if cfg.ibdiag_timeout_ms is not None and cfg.ibdiag_timeout_ms <= 0:
        bad("ibdiag_timeout_ms", "must be > 0")
    if cfg.scratch_dir is not None and not cfg.scratch_dir.is_dir():
        bad("scratch_dir", f"not a directory: {cfg.scratch_dir}")
    if cfg.ibdiag_bin_dir is not None and not cfg.ibdiag_bin_dir.is_dir():
        bad("ibdiag_bin_dir", f"not a directory: {cfg.ibdiag_bin_dir}")
    if cfg.node_name_map is not None:
        try:
            load_name_map(cfg.node_name_map)
        except NameMapError as exc:
            for problem in exc.problems:
                bad("node_name_map", problem)


SETTINGS = CommandSettings(
    prog="ibpool fabric-exporter",
    description=(
        "Fabric-wide InfiniBand exporter: ibnetdiscover, iblinkinfo, perfquery, smpquery vlarb, ibroute."
    ),
    config_type=FabricConfig,
    options=OPTIONS,
    validate=validate,
    default_listen=DEFAULT_LISTEN,
    normalise=_normalise,
)


load_config = SETTINGS.load
