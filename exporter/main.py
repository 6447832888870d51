"""`ibpool exporter`: parse the config, build the collectors over the hardware, serve until a signal."""

from __future__ import annotations

import logging
import resource
import threading

from exporter.config import ExporterConfig, load_config
from exporter.errors import ExporterError
from exporter.influx.config import push_settings
from exporter.influx.pusher import InfluxPusher, start_push
from exporter.wiring import HardwareFactory, Node, build_node, real_hardware
from foundation.health import HealthCheck
from foundation.http_server import MetricsHTTPServer, parse_listen_address
from foundation.registry import Registry
from foundation.routes import install_routes
from foundation.service import run_service, web_config_of

log = logging.getLogger(__name__)


def serve(cfg: ExporterConfig, stop: threading.Event, hardware: HardwareFactory = real_hardware) -> int:
    """Build everything from `cfg` over `hardware(cfg)`, serve until `stop` is set, then clean up."""
    web = web_config_of(cfg)
    raise_fd_limit()
    node: Node = build_node(cfg, hardware(cfg))
    try:
        pusher = start_influx_push(cfg, node)
    except (ExporterError, OSError) as exc:
        node.close()
        raise ExporterError(f"cannot start the InfluxDB push: {exc}") from None
    self_metrics = [pusher.collector] if pusher is not None else []
    registry = Registry([*node.collectors, *self_metrics], node.deadlines)
    health = HealthCheck(registry, cfg.health_max_age_seconds, node.health_checks)
    try:
        server = MetricsHTTPServer(parse_listen_address(cfg.listen_address), web)
    except OSError as exc:
        if pusher is not None:
            pusher.close()
        node.close()
        registry.close()
        raise ExporterError(f"cannot listen on {cfg.listen_address}: {exc.strerror or exc}") from None
    install_routes(server, registry, health, cfg.telemetry_path)
    for method, path, handler in node.routes:
        server.route(method, path, handler)
    server.serve_in_thread()
    log.info(
        "listening on %s (%s), collectors: %s",
        cfg.listen_address,
        "https" if web.tls else "http",
        ", ".join(registry.collector_names) or "none",
    )
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        if pusher is not None:
            pusher.close()  # before node.close(): its collectors read the node's hardware (or simulation)
        node.close()
        registry.close()
    return 0


def start_influx_push(cfg: ExporterConfig, node: Node) -> InfluxPusher | None:
    """The InfluxDB push over its own collector instances, started; None when no URL is configured."""
    settings = push_settings(cfg.influx)
    if settings is None or node.fresh_collectors is None:
        return None
    collectors, deadlines = node.fresh_collectors()
    pusher = start_push(settings, collectors, deadlines)
    log.info("pushing to %s every %g s", settings.url, settings.interval_seconds)
    return pusher


def raise_fd_limit() -> None:
    """Lift the soft open-file limit to the hard one: the IB source keeps ~60 sysfs files open per port."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d: %s", soft, exc)


def main(argv: list[str]) -> int:
    """Entry point of `ibpool exporter`; exit 2 on an invalid configuration."""
    return run_service("ibpool exporter", argv, load_config, serve)
