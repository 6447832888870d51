"""A `SimulatedNode` kept in step with one node of the model, synced only when asked.

`ClusterNodeView.sync()` (call it right before that node's exporter is scraped) brings the node's NVML fake
and sysfs tree up to the model's time: the GPU load the model shows now stands for the whole interval
since the last sync, the HCA counters get exactly the model's deltas (bytes, wait ticks, symbol errors,
link_downed), link state and saturation are copied, and GPU faults (XID, lost, restored) are replayed.
Nothing is written between syncs, so a thousand-node model pays only for the nodes actually scraped.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from simulator.cluster.model import ClusterModel
from simulator.cluster.views import HcaCounters
from simulator.fake_nvml import ManualClock
from simulator.node import NodeLoad, SimulatedNode

log = logging.getLogger(__name__)


class ClusterNodeView:
    """One model node behind a real `SimulatedNode` (sysfs tree + FakeNvml)."""

    def __init__(
        self,
        model: ClusterModel,
        node: str,
        root: Path | None = None,
        *,
        job_map_dir: Path | None = None,
        seed: int = 1,
    ) -> None:
        self.model, self.name = model, node
        self.clock = ManualClock(model.now)
        index = model.topology.node_index[node]
        self.sim = SimulatedNode(
            root,
            gpus=model.spec.gpus_per_node,
            ports=model.spec.ports_per_node,
            seed=seed,
            name=node,
            clock=self.clock,
            hca_guids=[model.topology.ports[port].node_guid for port in model.topology.hca_port[index]],
        )
        self.job_map_dir = job_map_dir
        self._job_map: dict[int, str] = {}
        self._last: tuple[HcaCounters, ...] = model.node_counters(node)
        self._events_seen = 0
        self._synced_at = model.now
        self.sync()

    @property
    def sysfs_root(self) -> Path:
        """The sysfs root to give `InfinibandSysfsSource`."""
        return self.sim.sysfs_root

    def sync(self) -> None:
        """Apply everything the model did to this node since the last sync."""
        model = self.model
        load = model.node_load(self.name)
        self.sim.advance(0.0, NodeLoad(load.gpus, ()))
        if model.now > self._synced_at:
            self.clock.advance(model.now - self._synced_at)
        self._synced_at = model.now
        counters = model.node_counters(self.name)
        for before, now in zip(self._last, counters, strict=True):
            self._apply_port(before, now)
        self._last = counters
        events = model.gpu_events.get(self.name, [])
        for event in events[self._events_seen :]:
            if event.kind == "xid":
                self.sim.nvml.inject_xid(event.gpu, event.value)
            elif event.kind == "lose_gpu":
                self.sim.nvml.lose_gpu(event.gpu)
            elif event.kind == "restore_gpu":
                self.sim.nvml.restore_gpu(event.gpu)
        self._events_seen = len(events)
        if self.job_map_dir is not None:
            self._write_job_map()

    def _apply_port(self, before: HcaCounters, now: HcaCounters) -> None:
        tree, device = self.sim.tree, now.device
        if device not in tree.devices:
            return
        tree.add_traffic(device, 1, now.xmit_bytes - before.xmit_bytes, now.rcv_bytes - before.rcv_bytes)
        deltas = {
            # Uncapped ticks: the node's own 32-bit counter saturates where it would on the HCA; the
            # model's capped value would stop the tree just short of 2^32-1 and read as idle.
            "port_xmit_wait": now.xmit_wait_ticks - before.xmit_wait_ticks,
            "symbol_error": now.symbol_error - before.symbol_error,
            "link_downed": now.link_downed - before.link_downed,
        }
        positive = {k: v for k, v in deltas.items() if v > 0}
        if positive:
            tree.add_counters(device, 1, positive)
        for counter in now.saturated - before.saturated:
            tree.saturate(device, 1, counter)
        if tree.link_up(device, 1) != now.link_up:
            tree.set_link(device, 1, now.link_up)

    def _write_job_map(self) -> None:
        """The prolog/epilog job map (one file per GPU) for the exporter's jobs collector."""
        assert self.job_map_dir is not None
        state = self.model.scheduler.node(self.name)
        wanted = {}
        for gpu, job_id in enumerate(state.slots):
            job = self.model.running.get(job_id)
            if job is not None:
                wanted[gpu] = f"job={job.id}\npool={job.pool}\n"
        if wanted == self._job_map:
            return
        self.job_map_dir.mkdir(parents=True, exist_ok=True)
        for gpu in self._job_map.keys() - wanted.keys():
            (self.job_map_dir / str(gpu)).unlink(missing_ok=True)
        for gpu, text in wanted.items():
            if self._job_map.get(gpu) != text:
                tmp = self.job_map_dir / f".{gpu}.tmp"
                tmp.write_text(text, encoding="ascii")
                os.replace(tmp, self.job_map_dir / str(gpu))
        self._job_map = wanted

    def close(self) -> None:
        """Remove the node's tree if it created it."""
        self.sim.close()


class MaterializedNodes:
    """`ClusterNodeView`s made on first use, one per node name."""

    def __init__(self, model: ClusterModel, root: Path | None = None) -> None:
        self.model, self.root = model, root
        self._views: dict[str, ClusterNodeView] = {}

    def get(self, node: str) -> ClusterNodeView:
        """The node's view, synced to the model's time."""
        view = self._views.get(node)
        if view is None:
            root = self.root / node if self.root is not None else None
            if root is not None:
                root.mkdir(parents=True, exist_ok=True)
            view = self._views[node] = ClusterNodeView(self.model, node, root)
        else:
            view.sync()
        return view

    def close(self) -> None:
        """Close every view."""
        for view in self._views.values():
            view.close()
        self._views.clear()
