"""`ibpool scheduler-exporter`: parse the config, poll Slurm in the background, serve until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import threading

from exporter.errors import ExporterError
from exporter.scheduler.collector import SchedulerCollector, SchedulerStatusCollector
from exporter.scheduler.commands import SlurmCommands
from exporter.scheduler.config import COMMANDS_PER_POLL, SchedulerExporterConfig, load_config
from exporter.scheduler.poller import SchedulerPoller
from exporter.scheduler.reader import SlurmReader
from foundation.collector import Collector
from foundation.health import HealthCheck
from foundation.http_server import MetricsHTTPServer, parse_listen_address
from foundation.registry import Registry
from foundation.routes import install_routes
from foundation.service import run_service, web_config_of

log = logging.getLogger(__name__)


def build_poller(cfg: SchedulerExporterConfig) -> SchedulerPoller:
    """The poller for `cfg` (not started); ExporterError when a Slurm client cannot be found."""
    commands = SlurmCommands.resolve(cfg.slurm_bin_dir, cfg.slurm_conf, cfg.timeout_seconds)
    reader = SlurmReader(commands, cfg.gpus_per_node, cfg.gres_name)
    return SchedulerPoller(reader.read, cfg.poll_interval_seconds)


class SchedulerExporter:
    """The running exporter: poller, registry, health and HTTP server; `start`, then `close`."""

    def __init__(self, cfg: SchedulerExporterConfig) -> None:
        self.cfg = cfg
        self.web = web_config_of(cfg)
        self.poller = build_poller(cfg)
        collectors: list[Collector] = [
            SchedulerCollector(self.poller, cfg.max_age_seconds),
            SchedulerStatusCollector(self.poller, cfg.max_age_seconds),
        ]
        self.registry = Registry(collectors)
        # collecting reads the cache, so it is always fresh; a dead poll thread is reported on its own
        health = HealthCheck(self.registry, max_age_seconds=0.0, extra_checks=[self.poller.health_problem])
        try:
            self.server = MetricsHTTPServer(parse_listen_address(cfg.listen_address), self.web)
        except OSError as exc:
            self.registry.close()
            raise ExporterError(f"cannot listen on {cfg.listen_address}: {exc.strerror or exc}") from None
        install_routes(self.server, self.registry, health, cfg.telemetry_path)

    @property
    def port(self) -> int:
        """The TCP port the server is bound to."""
        return self.server.port

    def start(self) -> None:
        """Start polling and serving, each on its own daemon thread."""
        self.poller.start()
        self.server.serve_in_thread()
        log.info(
            "listening on %s (%s), polling Slurm every %g s",
            self.cfg.listen_address,
            "https" if self.web.tls else "http",
            self.cfg.poll_interval_seconds,
        )

    def close(self) -> None:
        """Stop serving, wait for the current poll to end, release everything."""
        self.server.shutdown()
        self.server.server_close()
        self.poller.stop(timeout=self.cfg.timeout_seconds * COMMANDS_PER_POLL + 1)
        self.registry.close()


def serve(cfg: SchedulerExporterConfig, stop: threading.Event) -> int:
    """Poll and serve until `stop` is set, then clean up."""
    exporter = SchedulerExporter(cfg)
    exporter.start()
    try:
        stop.wait()
    finally:
        exporter.close()
    return 0


def main(argv: list[str]) -> int:
    """Entry point of `ibpool scheduler-exporter`; exit 2 on an invalid config, 1 when it cannot start."""
    return run_service("ibpool scheduler-exporter", argv, load_config, serve)
