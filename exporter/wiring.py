"""Builds the collectors a config asks for, over the hardware they read (real, or injected by a caller)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from exporter.collectors.gpu import GpuCollector, build_gpu_collector
from exporter.collectors.infiniband import InfinibandCollector
from exporter.collectors.jobs import JobsCollector
from exporter.config import ExporterConfig
from exporter.sources.gpu_sampler import SamplingSettings
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from exporter.sources.job_map import JobMapSource
from exporter.sources.verbs import VerbsMtuSource
from foundation.collector import Collector
from foundation.http_server import Route

log = logging.getLogger(__name__)


@dataclass
class Hardware:
    """What the collectors read: an NVML module (or an NVML-compatible object) and a sysfs root, plus
    whatever comes with them (extra HTTP routes, things to stop at exit). `verbs` is False where pyverbs
    must not be tried (a simulated node has no RDMA device)."""

    nvml: Any
    sysfs_root: Path
    verbs: bool = True
    routes: list[tuple[str, str, Route]] = field(default_factory=list)
    closers: list[Callable[[], None]] = field(default_factory=list)


def real_hardware(cfg: ExporterConfig) -> Hardware:
    """The machine's own NVML (pynvml loads the driver library at its first call) and sysfs."""
    return Hardware(pynvml, cfg.sysfs_root)


HardwareFactory = Callable[[ExporterConfig], Hardware]


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


def build_node(cfg: ExporterConfig, hardware: Hardware) -> Node:
    """Collectors for `hardware` as `cfg` enables them."""
    node = Node(routes=list(hardware.routes), closers=list(hardware.closers))
    node.collectors, node.deadlines, gpu = _collectors(cfg, hardware)
    if gpu is not None:
        node.health_checks.append(gpu.health_problem)
        if gpu.xid is not None:
            node.health_checks.append(gpu.xid.health_problem)

    def fresh() -> tuple[list[Collector], dict[str, float]]:
        collectors, deadlines, _ = _collectors(cfg, hardware, gpu)
        return collectors, deadlines

    node.fresh_collectors = fresh
    return node


def gpu_sampling(cfg: ExporterConfig) -> SamplingSettings:
    """The GPU sampling `cfg` asks for (an interval of 0: read at each scrape)."""
    return SamplingSettings(
        cfg.gpu_sample_interval_seconds, cfg.gpu_slow_sample_interval_seconds, cfg.gpu_deadline_seconds
    )


def _collectors(
    cfg: ExporterConfig, hardware: Hardware, sampled_gpu: GpuCollector | None = None
) -> tuple[list[Collector], dict[str, float], GpuCollector | None]:
    """New collector instances for `cfg` (their averaging windows are their own). A GPU collector that
    samples in the background is shared (`sampled_gpu`): one sampler per process, one read per GPU."""
    collectors: list[Collector] = []
    deadlines: dict[str, float] = {}
    gpu: GpuCollector | None = None
    if cfg.gpu:
        sampling = gpu_sampling(cfg)
        if sampled_gpu is not None and sampling.interval_seconds > 0:
            gpu = sampled_gpu.sharing()
        else:
            gpu = build_gpu_collector(hardware.nvml, sampling=sampling)
        collectors.append(gpu)
        deadlines[gpu.name] = cfg.gpu_deadline_seconds
    if cfg.infiniband:
        verbs = VerbsMtuSource() if cfg.verbs and hardware.verbs else None
        source = InfinibandSysfsSource(hardware.sysfs_root)
        collectors.append(InfinibandCollector(source, verbs, mirror=cfg.infiniband_mirror))
    if cfg.jobs:
        collectors.append(JobsCollector(JobMapSource(cfg.jobs_directory), gpu.uuid_of if gpu else None))
    return collectors, deadlines, gpu
