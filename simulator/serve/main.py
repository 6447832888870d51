"""`ibpool simulate`: build the cluster model, run it, and serve it until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import sys
import threading

from exporter.errors import ExporterError
from foundation.service import run_service, web_config_of
from simulator.cluster.errors import ClusterError
from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import load_spec
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.config import SimulateConfig, load_config
from simulator.serve.presets import generated_workload, preset_spec, trace_workload

log = logging.getLogger(__name__)

PROG = "ibpool simulate"


def build_model(cfg: SimulateConfig) -> ClusterModel:
    """The model `cfg` describes: spec file or preset, generated or trace-driven workload."""
    spec = load_spec(cfg.spec_file) if cfg.spec_file else None
    if cfg.trace_file is not None:
        spec, jobs = trace_workload(cfg.trace_file, spec, cfg.seed, cfg.trace_minutes)
        return ClusterModel(spec, jobs)
    if spec is None:
        spec = preset_spec(cfg.preset, cfg.nodes, cfg.seed, cfg.start_hour)
    return ClusterModel(spec, generated_workload(spec, cfg.seed))


def server_settings(cfg: SimulateConfig) -> ServerSettings:
    """The server part of the config."""
    return ServerSettings(
        listen_address=cfg.listen_address,
        speed=cfg.speed,
        sweep_interval_seconds=cfg.sweep_interval_seconds,
        poll_interval_seconds=cfg.poll_interval_seconds,
        max_nodes=cfg.max_nodes,
        hca_ports=cfg.hca_ports,
        advertise_address=cfg.advertise_address,
        workdir=cfg.workdir,
    )


def serve(cfg: SimulateConfig, stop: threading.Event) -> int:
    """Build, warm up, serve until `stop` is set, then clean up."""
    try:
        model = build_model(cfg)
        if cfg.warmup_seconds:
            model.advance(cfg.warmup_seconds)
    except (ClusterError, OSError) as exc:
        raise ExporterError(f"cannot build the cluster model: {exc}") from None
    try:
        server = ClusterServer(model, server_settings(cfg), web_config_of(cfg))
    except OSError as exc:
        raise ExporterError(f"cannot listen on {cfg.listen_address}: {exc.strerror or exc}") from None
    server.start()
    try:
        stop.wait()
    finally:
        server.close()
    return 0


def main(argv: list[str]) -> int:
    """Entry point of `ibpool simulate`; exit 2 on an invalid configuration, 1 when it cannot start."""
    return run_service(PROG, argv, load_config, serve)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
