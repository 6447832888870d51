"""Builds the collectors (and, with --simulate, the simulated node) that a config asks for."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.collectors.base import Collector
from exporter.collectors.gpu import GpuCollector, build_gpu_collector
from exporter.collectors.infiniband import InfinibandCollector
from exporter.collectors.jobs import JobsCollector
from exporter.config import ExporterConfig
from exporter.http_server import Request, Response, Route
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from exporter.sources.job_map import JobMapSource
from exporter.sources.verbs import VerbsMtuSource

log = logging.getLogger(__name__)


@dataclass
class Node:
    """What the exporter serves: collectors, their deadlines, extra health checks and routes."""

    collectors: list[Collector] = field(default_factory=list)
    deadlines: dict[str, float] = field(default_factory=dict)
    health_checks: list[Callable[[], str | None]] = field(default_factory=list)
    routes: list[tuple[str, str, Route]] = field(default_factory=list)
    closers: list[Callable[[], None]] = field(default_factory=list)
    # a second, independent set of collectors over the same hardware (the InfluxDB push samples its own)
    fresh_collectors: Callable[[], tuple[list[Collector], dict[str, float]]] | None = None

    def close(self) -> None:
        """Stop what the node started (simulation threads, temp trees); collectors close via the registry."""
        for closer in reversed(self.closers):
            try:
                closer()
            except Exception:
                log.exception("cleanup failed")


def build_node(cfg: ExporterConfig) -> Node:
    """Collectors for the real hardware, or for a simulated node when `cfg.simulate` is set."""
    node = Node()
    nvml: Any
    sysfs_root = cfg.sysfs_root
    if cfg.simulate:
        from simulator.node import SimulatedNode

        sim = SimulatedNode(gpus=cfg.simulate_gpus, ports=cfg.simulate_ports, seed=cfg.simulate_seed)
        node.closers.append(sim.close)
        _start_simulation(cfg, sim, node)
        nvml, sysfs_root = sim.nvml, sim.sysfs_root
    else:
        import pynvml

        nvml = pynvml
    node.collectors, node.deadlines, gpu = _collectors(cfg, nvml, sysfs_root)
    if gpu is not None and gpu.xid is not None:
        node.health_checks.append(gpu.xid.health_problem)

    def fresh() -> tuple[list[Collector], dict[str, float]]:
        collectors, deadlines, _ = _collectors(cfg, nvml, sysfs_root)
        return collectors, deadlines

    node.fresh_collectors = fresh
    return node


def _collectors(
    cfg: ExporterConfig, nvml: Any, sysfs_root: Path
) -> tuple[list[Collector], dict[str, float], GpuCollector | None]:
    """New collector instances for `cfg` (their state, e.g. NVML sample windows, is their own)."""
    collectors: list[Collector] = []
    deadlines: dict[str, float] = {}
    gpu: GpuCollector | None = None
    if cfg.gpu:
        gpu = build_gpu_collector(nvml)
        collectors.append(gpu)
        deadlines[gpu.name] = cfg.gpu_deadline_seconds
    if cfg.infiniband:
        verbs = VerbsMtuSource() if cfg.verbs and not cfg.simulate else None
        collectors.append(InfinibandCollector(InfinibandSysfsSource(sysfs_root), verbs))
    if cfg.jobs:
        collectors.append(JobsCollector(JobMapSource(cfg.jobs_directory), gpu.uuid_of if gpu else None))
    return collectors, deadlines, gpu


def _start_simulation(cfg: ExporterConfig, sim: Any, node: Node) -> None:
    from simulator.node import FaultError, SimulationTicker, StandaloneWorkload

    workload = StandaloneWorkload(cfg.simulate_gpus, cfg.simulate_ports, cfg.simulate_seed)
    ticker = SimulationTicker(sim, workload, cfg.simulate_step_seconds)
    ticker.start()
    node.closers.append(ticker.stop)

    def fault(request: Request) -> Response:
        def arg(name: str) -> int | None:
            values = request.query.get(name)
            return int(values[0]) if values and values[0].lstrip("-").isdigit() else None

        kind = (request.query.get("kind") or [""])[0]
        try:
            done = sim.fault(kind, gpu=arg("gpu"), port=arg("port"), value=arg("value") or 1)
        except FaultError as exc:
            return Response(400, f"{exc}\n".encode())
        return Response(200, json.dumps({"done": done}).encode() + b"\n", "application/json")

    node.routes.append(("POST", "/-/simulate/fault", fault))
