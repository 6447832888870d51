"""`ibpool fabric-exporter`: sweep the fabric in the background and serve the last complete sweep.

The diagnostics inherit this process's environment, so a simulated fabric is reached exactly as the
diagnostics reach it: `LD_PRELOAD=.../libumad2sim.so IBSIM_SOCKNAME=... ibpool fabric-exporter`.
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
import threading
from functools import partial
from pathlib import Path

from exporter.errors import ExporterError
from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.collector import FabricCollector, FabricStatusCollector
from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.config import FabricConfig, load_config
from exporter.fabric.families import build_families
from exporter.fabric.names import NameMap, load_name_map
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandRunner, scratch_parent
from foundation.health import HealthCheck
from foundation.http_server import MetricsHTTPServer, parse_listen_address
from foundation.registry import Registry
from foundation.routes import install_routes
from foundation.service import run_service, web_config_of

log = logging.getLogger(__name__)

PROG = "ibpool fabric-exporter"


def build_sweeper(cfg: FabricConfig, workdir: Path) -> Sweeper:
    """The sweeper a config describes; diagnostics run in `workdir` with this process's environment."""
    options = DiagOptions(cfg.ibdiag_ca, cfg.ibdiag_port, cfg.ibdiag_timeout_ms, cfg.ibdiag_bin_dir)
    settings = SweepSettings(
        concurrency=cfg.concurrency,
        hca_ports=cfg.hca_ports,
        vl_counters=cfg.vl_counters,
        port_states=cfg.port_states,
        forget_after_seconds=cfg.forget_after_seconds,
        vlarb_ports=cfg.vlarb_ports,
        routes_interval_seconds=cfg.routes_interval_seconds,
    )
    runner = CommandRunner(cfg.command_timeout_seconds, cwd=workdir)
    return Sweeper(DiagCommands(options), runner, settings, workdir)


def serve(cfg: FabricConfig, stop: threading.Event) -> int:
    """Sweep and serve until `stop` is set, then clean up (threads, scratch directory)."""
    web = web_config_of(cfg)
    names = load_name_map(cfg.node_name_map) if cfg.node_name_map else NameMap()
    workdir = Path(tempfile.mkdtemp(prefix="ibpool-fabric-", dir=scratch_parent(cfg.scratch_dir)))
    sweeper = build_sweeper(cfg, workdir)
    build = partial(build_families, names=names, hca_ports=cfg.hca_ports, vl_count=cfg.vl_count)
    background = BackgroundSweeper(sweeper, cfg.sweep_interval_seconds, build, cfg.health_max_age_seconds)
    registry = Registry([FabricCollector(background), FabricStatusCollector(background)])
    health = HealthCheck(registry, cfg.health_max_age_seconds, [background.health_problem])
    try:
        server = MetricsHTTPServer(parse_listen_address(cfg.listen_address), web)
    except OSError as exc:
        sweeper.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise ExporterError(f"cannot listen on {cfg.listen_address}: {exc.strerror or exc}") from None
    install_routes(server, registry, health, cfg.telemetry_path)
    server.serve_in_thread()
    background.start()
    log.info(
        "listening on %s (%s), sweeping every %g s",
        cfg.listen_address,
        "https" if web.tls else "http",
        cfg.sweep_interval_seconds,
    )
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        background.stop(cfg.command_timeout_seconds * 3)
        sweeper.close()
        registry.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    """Entry point of `ibpool fabric-exporter`; exit 2 on an invalid configuration."""
    return run_service(PROG, argv, load_config, serve)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
