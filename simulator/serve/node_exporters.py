"""One real node exporter per simulated node, made on first scrape, at most `max_nodes` at a time.

A node's exporter is the node exporter's own collectors (GPU over the node's NVML fake, InfiniBand over
its sysfs tree, jobs over its prolog job map) in a `Registry`, over a `ClusterNodeView` that is synced to
the model just before each collection. Materializing a node writes a sysfs tree (a few ms and some disk),
so only scraped nodes are made; past `max_nodes` the least recently scraped one is closed and its files
removed (scraped again later, it starts afresh: its counters reset, which `rate()` handles).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from exporter.collectors.gpu import build_gpu_collector
from exporter.collectors.infiniband import InfinibandCollector
from exporter.collectors.jobs import JobsCollector
from exporter.sources.ib_sysfs import InfinibandSysfsSource
from exporter.sources.job_map import JobMapSource
from foundation.collector import Collector
from foundation.exposition import MetricFamily
from foundation.registry import Registry
from simulator.cluster.materialize import ClusterNodeView
from simulator.serve.errors import RequestError
from simulator.serve.runner import ClusterRunner

log = logging.getLogger(__name__)


@dataclass
class _Exporter:
    """A materialized node and its collectors; `lock` serialises its sync-and-collect."""

    view: ClusterNodeView
    registry: Registry
    directory: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def close(self) -> None:
        self.closed = True
        self.registry.close()
        self.view.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class NodeExporters:
    """Node exporters made on demand under `workdir`, least recently scraped closed past `max_nodes`."""

    def __init__(self, runner: ClusterRunner, workdir: Path, max_nodes: int = 64, xid_timeout_ms: int = 500):
        self._runner = runner
        self._workdir = workdir
        self._max = max(1, max_nodes)
        self._xid_timeout_ms = xid_timeout_ms
        self._lock = threading.Lock()
        self._exporters: OrderedDict[str, _Exporter] = OrderedDict()
        self._known = frozenset(runner.model.spec.nodes)

    @property
    def materialized(self) -> list[str]:
        """Names of the nodes that have an exporter now, least recently scraped first."""
        with self._lock:
            return list(self._exporters)

    def collect(self, node: str) -> list[MetricFamily]:
        """Sync `node` to the model and run its collectors (RequestError for an unknown node)."""
        if node not in self._known:
            raise RequestError(f"unknown node {node!r}")
        while True:
            exporter = self._get(node)
            with exporter.lock:
                if exporter.closed:  # evicted between lookup and lock: make it again
                    continue
                with self._runner.locked():
                    exporter.view.sync()
                return exporter.registry.collect()

    def _get(self, node: str) -> _Exporter:
        evicted: list[_Exporter] = []
        with self._lock:
            exporter = self._exporters.get(node)
            if exporter is not None:
                self._exporters.move_to_end(node)
                return exporter
            exporter = self._exporters[node] = self._make(node)
            while len(self._exporters) > self._max:
                evicted.append(self._exporters.popitem(last=False)[1])
        for old in evicted:
            with old.lock:
                log.debug("closing the exporter of %s (more than %d materialized)", old.view.name, self._max)
                old.close()
        return exporter

    def _make(self, node: str) -> _Exporter:
        directory = self._workdir / node
        (directory / "sys").mkdir(parents=True, exist_ok=True)
        jobs = directory / "jobs"
        with self._runner.locked() as model:
            view = ClusterNodeView(model, node, directory / "sys", job_map_dir=jobs)
        gpu = build_gpu_collector(view.sim.nvml, self._xid_timeout_ms)
        collectors: list[Collector] = [
            gpu,
            InfinibandCollector(InfinibandSysfsSource(view.sysfs_root)),
            JobsCollector(JobMapSource(jobs), gpu.uuid_of),
        ]
        return _Exporter(view, Registry(collectors), directory)

    def close(self) -> None:
        """Close every node exporter and remove its files."""
        with self._lock:
            exporters = list(self._exporters.values())
            self._exporters.clear()
        for exporter in exporters:
            with exporter.lock:
                exporter.close()
