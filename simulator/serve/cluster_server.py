"""The simulated cluster behind one HTTP port: the real exporters over the model, and its controls.

Each piece is the real one except where the model stands in for hardware: the fabric exporter's sweeper
and collectors over `SimulatedFabric`, the scheduler exporter's poller and collectors over `SimulatedSlurm`,
one node exporter per scraped node (`NodeExporters`). Sweeps and polls run on their intervals and once more
right after every control, fault or manual advance (one at a time per reader, so a read begun before a
change never replaces the one after it): a change shows in the next scrape.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from exporter.fabric.background import BackgroundSweeper
from exporter.fabric.collector import FabricCollector, FabricStatusCollector
from exporter.fabric.families import build_families
from exporter.fabric.names import NameMap
from exporter.scheduler.collector import SchedulerCollector, SchedulerStatusCollector
from exporter.scheduler.model import ClusterState
from exporter.scheduler.poller import SchedulerPoller
from foundation.exposition import CONTENT_TYPE, MetricFamily, render
from foundation.http_server import MetricsHTTPServer, Request, Response, parse_listen_address
from foundation.loop import Loop
from foundation.registry import Registry
from foundation.web_config import WebConfig
from simulator.cluster.errors import ClusterError
from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import VL_COUNT, QosSpec
from simulator.cluster.views import FabricView
from simulator.serve import controls
from simulator.serve.errors import RequestError
from simulator.serve.fabric_source import SimulatedFabric
from simulator.serve.node_exporters import NodeExporters
from simulator.serve.runner import ClusterRunner
from simulator.serve.scheduler_source import SimulatedSlurm, cluster_state
from simulator.serve.status import health_report, landing_page, model_status
from simulator.serve.targets import node_metrics_path, sd_groups

log = logging.getLogger(__name__)

JSON = "application/json"


@dataclass(frozen=True)
class ServerSettings:
    """How the cluster server runs and serves."""

    listen_address: str = "127.0.0.1:9479"
    speed: float = 60.0  # simulated seconds per wall second; 0 freezes the clock
    step_seconds: float = 0.5  # wall seconds between clock steps
    sweep_interval_seconds: float = 1.0
    poll_interval_seconds: float = 1.0
    max_nodes: int = 64  # node exporters materialized at once
    hca_ports: bool = False  # the fabric exporter also reads HCA ports
    advertise_address: str | None = None  # HOST:PORT written into /targets (default: the request's Host)
    workdir: Path | None = None  # where node trees go (default: a temporary directory)
    xid_timeout_ms: int = 500


def _json(status: int, body: object) -> Response:
    return Response(status, (json.dumps(body, sort_keys=True) + "\n").encode(), JSON)


class ClusterServer:
    """Runs the model and serves the exporters and controls; `start`, then `close`."""

    def __init__(self, model: ClusterModel, settings: ServerSettings, web: WebConfig | None = None) -> None:
        self.settings = settings
        self.runner = ClusterRunner(model, settings.speed, settings.step_seconds)
        self._owns_workdir = settings.workdir is None
        self.workdir = settings.workdir or Path(tempfile.mkdtemp(prefix="ibpool-simulate-"))
        self.fabric = SimulatedFabric(
            self._fabric_view, settings.hca_ports, read_qos=self._qos, topology=model.topology
        )
        build = partial(build_families, names=NameMap(), hca_ports=settings.hca_ports, vl_count=VL_COUNT)
        max_age = max(10.0, 5 * max(settings.sweep_interval_seconds, settings.poll_interval_seconds))
        self.sweeper = BackgroundSweeper(self.fabric, settings.sweep_interval_seconds, build, max_age)
        self.slurm = SimulatedSlurm(self._cluster_state)
        self.poller = SchedulerPoller(self.slurm.read, settings.poll_interval_seconds)
        self.fabric_registry = Registry([FabricCollector(self.sweeper), FabricStatusCollector(self.sweeper)])
        self.scheduler_registry = Registry(
            [SchedulerCollector(self.poller, max_age), SchedulerStatusCollector(self.poller, max_age)]
        )
        self.nodes = NodeExporters(
            self.runner, self.workdir / "nodes", settings.max_nodes, settings.xid_timeout_ms
        )
        self._sweep_lock, self._poll_lock = threading.Lock(), threading.Lock()
        # `start` runs the first sweep and poll itself; a change's listener runs them too, so each read
        # holds its lock (a read that began before a change never lands after the one after it).
        self._loops = [
            Loop("fabric-sweep", settings.sweep_interval_seconds, self._sweep, run_at_start=False),
            Loop("scheduler-poll", settings.poll_interval_seconds, self._poll, run_at_start=False),
        ]
        self.runner.on_change(self._sweep)
        self.runner.on_change(self._poll)
        try:
            self.server = MetricsHTTPServer(parse_listen_address(settings.listen_address), web)
        except OSError:
            self._release()
            raise
        self._serving = False
        self._install_routes(model)

    @property
    def port(self) -> int:
        """The TCP port the server is bound to."""
        return self.server.port

    def _sweep(self) -> None:
        with self._sweep_lock:
            self.sweeper.run_once()

    def _poll(self) -> None:
        with self._poll_lock:
            self.poller.poll_once()

    def _fabric_view(self) -> FabricView:
        with self.runner.locked() as model:
            return model.fabric_view(include_hcas=True)

    def _qos(self) -> QosSpec:
        with self.runner.locked() as model:
            return model.qos()

    def _cluster_state(self) -> ClusterState:
        with self.runner.locked() as model:
            return cluster_state(model)

    # --- routes ----------------------------------------------------------------------------------

    def _install_routes(self, model: ClusterModel) -> None:
        route = self.server.route
        route("GET", "/", lambda _: Response(200, landing_page(model).encode(), "text/html; charset=utf-8"))
        route("GET", "/healthz", self._healthz)
        route("GET", "/targets", self._targets)
        route("GET", "/fabric/metrics", lambda _: self._metrics(self.fabric_registry.collect))
        route("GET", "/scheduler/metrics", lambda _: self._metrics(self.scheduler_registry.collect))
        for node in model.spec.nodes:
            route("GET", node_metrics_path(node), partial(self._node_metrics, node))
        route("GET", "/-/model", lambda _: _json(200, self._status()))
        actions: dict[str, Callable[[Request], str]] = {
            "/-/control/vl-weights": lambda r: self.runner.change(
                lambda m: controls.set_vl_weights(m, r.body, r.query)
            ),
            "/-/control/partition": self._model_action(controls.set_partition),
            "/-/control/drain": self._model_action(controls.drain),
            "/-/control/resume": self._model_action(controls.resume),
            "/-/control/advance": self._advance,
            "/-/fault": self._fault,
        }
        for path, action in actions.items():
            route("POST", path, partial(self._control, action))

    @staticmethod
    def _metrics(collect: Callable[[], list[MetricFamily]]) -> Response:
        return Response(200, render(collect()).encode(), CONTENT_TYPE)

    def _node_metrics(self, node: str, _: Request) -> Response:
        return self._metrics(lambda: self.nodes.collect(node))

    def _targets(self, request: Request) -> Response:
        address = self.settings.advertise_address or request.headers.get("host") or f"127.0.0.1:{self.port}"
        pools = [p for value in request.query.get("pool", []) for p in value.split(",") if p]
        limit_text = (request.query.get("limit") or [""])[-1]
        if limit_text and not limit_text.isdigit():
            return Response(400, b"limit must be a non-negative integer\n")
        with self.runner.locked() as model:
            view = model.scheduler_view()
        return _json(200, sd_groups(view, address, pools, int(limit_text) if limit_text else None))

    def _healthz(self, _: Request) -> Response:
        report = health_report(self.runner, self.sweeper, self.poller, self._loops)
        return _json(200 if report["status"] == "ok" else 503, report)

    def _status(self) -> dict[str, object]:
        with self.runner.locked() as model:
            status = model_status(model, self.runner.speed)
        status["materialized_nodes"] = self.nodes.materialized
        return status

    def _control(self, action: Callable[[Request], str], request: Request) -> Response:
        try:
            result = action(request)
        except ClusterError as exc:
            return _json(400, {"ok": False, "error": str(exc)})
        log.info("%s: %s", request.path, result)
        return _json(200, {"ok": True, "result": result, "time": self.runner.now})

    def _model_action(self, apply: controls.ModelAction) -> Callable[[Request], str]:
        def action(request: Request) -> str:
            params = controls.request_params(request.query, request.body)
            return self.runner.change(lambda model: apply(model, params))

        return action

    def _advance(self, request: Request) -> str:
        params = controls.request_params(request.query, request.body)
        try:
            seconds = float(params.get("seconds", ""))
        except ValueError:
            raise RequestError("give seconds=N (simulated seconds, >= 0)") from None
        if not 0 <= seconds < float("inf"):
            raise RequestError("seconds must be >= 0")
        self.runner.advance(seconds)
        return f"advanced {seconds:g} s"

    def _fault(self, request: Request) -> str:
        params = controls.request_params(request.query, request.body)
        kind = params.get("kind", "")
        if kind in ("switch_down", "switch_up"):
            guid = self.fabric.set_answering(params.get("switch", ""), kind == "switch_up")
            self.runner.changed()
            return f"{kind} {guid}"
        if kind in ("scheduler_down", "scheduler_up"):
            self.slurm.available = kind == "scheduler_up"
            self.runner.changed()
            return kind
        return self.runner.change(lambda model: controls.model_fault(model, kind, params))

    # --- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """First sweep and poll (so the first scrape has data), then the clock, background reads, HTTP."""
        self._sweep()
        self._poll()
        for loop in self._loops:
            loop.start()
        self.runner.start()
        self.server.serve_in_thread()
        self._serving = True
        log.info(
            "serving %d simulated nodes on port %d at %g simulated s per s",
            len(self.runner.model.spec.nodes),
            self.port,
            self.settings.speed,
        )

    def close(self) -> None:
        """Stop serving and every thread; remove the node trees."""
        if self._serving:
            self.server.shutdown()
        self.server.server_close()
        self._release()

    def _release(self) -> None:
        self.runner.stop(5.0)
        for loop in self._loops:
            loop.stop(5.0)
        self.fabric_registry.close()
        self.scheduler_registry.close()
        self.nodes.close()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
