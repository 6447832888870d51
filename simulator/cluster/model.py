"""The cluster model: time, jobs, scheduler, fabric, controls and faults (see the package docstring)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from simulator.cluster import views
from simulator.cluster.effects import FabricEffects
from simulator.cluster.errors import ControlError, FaultError
from simulator.cluster.fabric import Fabric
from simulator.cluster.hostlist import expand_hostlist, parse_vlarb
from simulator.cluster.jobs import DONE, FAILED, PENDING, RUNNING, Job
from simulator.cluster.scheduler import FREE, NodeState, Scheduler
from simulator.cluster.sharing import Flow
from simulator.cluster.spec import SL_COUNT, ClusterSpec, QosSpec, check_sl2vl, check_vlarb, validate
from simulator.cluster.topology import Topology
from simulator.cluster.workload import JobRequest
from simulator.node import GpuLoad, NodeLoad, PortLoad

log = logging.getLogger(__name__)

COMM_UTILIZATION = 0.15  # GPU utilization while a job waits on its all-reduce
VlarbInput = str | Mapping[int, int] | Sequence[tuple[int, int]]


@dataclass(frozen=True)
class ModelEvent:
    """Something done to the model (a control or a fault), for timelines."""

    time: float
    kind: str
    target: str
    detail: str


@dataclass(frozen=True)
class GpuEvent:
    """A GPU fault a materialized node must replay on its NVML fake."""

    kind: str  # xid | lose_gpu | restore_gpu
    gpu: int
    value: int = 0


class ClusterModel:
    """A seeded, deterministic, in-memory cluster advanced in fixed ticks."""

    def __init__(self, spec: ClusterSpec, workload: Iterable[JobRequest] | None = None) -> None:
        self.spec = validate(spec)
        self.topology = Topology(spec)
        fab = spec.fabric
        effects = FabricEffects(fab.arbitration_packets, fab.credit_stall, fab.hol_blocking, fab.mtu_bytes)
        self.fabric = Fabric(self.topology, fab.wait_tick_bytes, fab.mtu_bytes, effects)
        self.scheduler = Scheduler(spec.nodes, {p.name: p.nodes for p in spec.pools}, spec.gpus_per_node)
        self.now = 0.0
        self.jobs: dict[int, Job] = {}
        self.running: dict[int, Job] = {}
        self.events: list[ModelEvent] = []
        self.gpu_events: dict[str, list[GpuEvent]] = {}
        self._next_id = 1
        self._vlarb_high = list(spec.qos.vlarb_high)
        self._vlarb_low = list(spec.qos.vlarb_low)
        self._sl2vl = list(spec.qos.sl2vl)
        self._pool_sl = {p.name: spec.priority_classes[p.priority_class] for p in spec.pools}
        self._pool_class = {p.name: p.priority_class for p in spec.pools}
        self._arrivals: Iterator[JobRequest] = iter(workload if workload is not None else ())
        self._peek: JobRequest | None = next(self._arrivals, None)
        self._fabric_dirty = True
        self._routes_dirty = False
        self._flows: dict[int, list[Flow]] = {}
        self._refresh()

    # --- time ------------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Run the model for `seconds` of simulated time, in ticks of `spec.tick_seconds` at most."""
        remaining = seconds
        while remaining > 1e-9:
            dt = min(self.spec.tick_seconds, remaining)
            self._step(dt)
            remaining -= dt

    def _step(self, dt: float) -> None:
        self._refresh()
        self.fabric.integrate(dt)
        finished = []
        for job in self.running.values():
            job.progress += dt * job.speed
            if job.progress >= job.request.work_seconds - 1e-9:
                finished.append(job)
        self.now += dt
        for job in finished:
            self._finish(job, DONE)
        self._refresh()

    def _refresh(self) -> None:
        """Take arrivals, schedule changed pools, reshare the fabric if anything changed."""
        while self._peek is not None and self._peek.submit_time <= self.now + 1e-9:
            self._submit(self._peek)
            self._peek = next(self._arrivals, None)
        if self.scheduler.dirty:
            for job in self.scheduler.schedule(self.now, self.jobs):
                self._started(job)
        if self._fabric_dirty:
            self._reallocate()

    # --- jobs ------------------------------------------------------------------------------------

    def submit(self, request: JobRequest) -> int:
        """Queue a job in its pool now and schedule; returns its id. Over a node's GPUs means whole nodes."""
        job_id = self._submit(request)
        self._refresh()
        return job_id

    def _submit(self, request: JobRequest) -> int:
        if request.pool not in self.scheduler.pools:
            raise ControlError(f"unknown pool {request.pool!r}")
        if request.gpus < 1:
            raise ControlError(f"a job needs at least one GPU, not {request.gpus}")
        per_node = self.spec.gpus_per_node
        nodes = max(1, math.ceil(request.gpus / per_node))
        gpus = nodes * per_node if nodes > 1 else request.gpus
        job = Job(self._next_id, request, gpus, nodes)
        self._next_id += 1
        self.jobs[job.id] = job
        self.scheduler.submit(job)
        return job.id

    def _started(self, job: Job) -> None:
        self.running[job.id] = job
        req = job.request
        if job.distributed:
            n = job.nodes_needed
            job.flow_bytes = 2 * (n - 1) / n * req.allreduce_bytes / self.spec.ports_per_node
            job.iteration_alone = req.compute_seconds + job.flow_bytes / self.topology.capacity
            self._fabric_dirty = True
        else:
            job.iteration_alone = req.compute_seconds
        job.iteration_time, job.speed = job.iteration_alone, 1.0

    def _finish(self, job: Job, state: str) -> None:
        job.state, job.end_time = state, self.now
        self.scheduler.release(job)
        del self.running[job.id]
        self._flows.pop(job.id, None)
        if job.distributed:
            self._fabric_dirty = True

    def vl_of_pool(self, pool: str) -> int:
        """The VL a pool's traffic uses now (its SL through the SL-to-VL map)."""
        return self._sl2vl[self._pool_sl[pool] % len(self._sl2vl)]

    def _reallocate(self) -> None:
        self._fabric_dirty = False
        if self._routes_dirty:
            self._flows.clear()
            self._routes_dirty = False
        flows: list[Flow] = []
        owners: list[tuple[Job, list[Flow]]] = []
        for job in self.running.values():
            if not job.distributed:
                continue
            job_flows = self._flows.get(job.id)
            if job_flows is None:
                job_flows = self._flows[job.id] = self._ring_flows(job)
            vl = self.vl_of_pool(job.pool)
            for flow in job_flows:
                flow.vl = vl
            owners.append((job, job_flows))
            flows += job_flows
        self.fabric.reallocate(flows, self.vl_weights())
        for job, job_flows in owners:
            self._apply_rate(job, job_flows)

    def _ring_flows(self, job: Job) -> list[Flow]:
        """One flow per ring step and rail; none when some step has no route (a host's own cable on a rail
        down, or no uplink up at both leaves): the job stalls (docs/simulator.md)."""
        flows: list[Flow] = []
        demand = job.flow_bytes / job.iteration_alone
        vl = self.vl_of_pool(job.pool)
        for k, src in enumerate(job.nodes):
            dst = job.nodes[(k + 1) % len(job.nodes)]
            for rail in range(self.spec.ports_per_node):
                path = self.topology.route(src, dst, rail, self.fabric.link_up)
                if path is None:
                    return []
                flows.append(Flow(job.id, path, vl, demand))
        return flows

    def _apply_rate(self, job: Job, flows: list[Flow]) -> None:
        rate = min((f.rate for f in flows), default=0.0)
        demand = job.flow_bytes / job.iteration_alone
        job.rate = rate
        job.bottleneck, job.bottleneck_capacity = -1, 0.0
        for f in flows:
            if f.bottleneck >= 0:
                job.bottleneck = f.channels[f.bottleneck]
                job.bottleneck_capacity = self.topology.capacity
                break
        if not flows:  # no route: the broken ring stalls on the first down host cable it needs
            job.bottleneck = self._down_host_channel(job)
            job.bottleneck_capacity = self.topology.capacity if job.bottleneck >= 0 else 0.0
        if rate <= 0:
            job.iteration_time, job.speed = math.inf, 0.0
        elif rate >= demand * (1 - 1e-9):
            job.iteration_time, job.speed = job.iteration_alone, 1.0
        else:
            job.iteration_time = job.flow_bytes / rate
            job.speed = job.iteration_alone / job.iteration_time

    def _down_host_channel(self, job: Job) -> int:
        """The channel over the first down host cable that a ring step needs (ring order, then rail: the
        sender's cable up, else the receiver's down); -1 when every host cable is up (no uplink path)."""
        up, host_link = self.fabric.link_up, self.topology.host_link
        for k, src in enumerate(job.nodes):
            dst = job.nodes[(k + 1) % len(job.nodes)]
            for rail in range(self.spec.ports_per_node):
                if not up[host_link[src][rail]]:
                    return 2 * host_link[src][rail]
                if not up[host_link[dst][rail]]:
                    return 2 * host_link[dst][rail] + 1
        return -1

    # --- QoS controls (OpenSM) -------------------------------------------------------------------

    def vl_weights(self) -> tuple[int, ...]:
        """Effective arbitration weight per VL (high + low table entries)."""
        return self.qos().vl_weights()

    def qos(self) -> QosSpec:
        """The QoS tables in force."""
        return QosSpec(tuple(self._vlarb_high), tuple(self._vlarb_low), tuple(self._sl2vl))

    def set_vl_weights(self, high: VlarbInput, low: VlarbInput) -> None:
        """Replace `qos_vlarb_high` and `qos_vlarb_low` (`"0:4,1:64"`, a mapping or pairs), as on SIGHUP."""
        new_high, new_low = _vlarb(high), _vlarb(low)
        problems = check_vlarb(new_high, "vlarb_high") + check_vlarb(new_low, "vlarb_low")
        if problems:
            raise ControlError("; ".join(problems))
        self._vlarb_high, self._vlarb_low = new_high, new_low
        self._fabric_dirty = True
        self._record("set_vl_weights", "fabric", f"high={_fmt(new_high)} low={_fmt(new_low)}")

    def set_sl2vl(self, sl2vl: str | Sequence[int]) -> None:
        """Replace `qos_sl2vl` (`"0,1,2,..."` or a sequence; up to 16 entries)."""
        values = [int(v, 0) for v in sl2vl.split(",")] if isinstance(sl2vl, str) else [int(v) for v in sl2vl]
        problems = check_sl2vl(values, "sl2vl")
        if problems:
            raise ControlError("; ".join(problems))
        self._sl2vl = values
        self._fabric_dirty = True
        self._record("set_sl2vl", "fabric", ",".join(map(str, values)))

    def set_pool_service_level(self, pool: str, sl: int) -> None:
        """Move a pool's port group to service level `sl` (a QoS policy change)."""
        if pool not in self._pool_sl:
            raise ControlError(f"unknown pool {pool!r}")
        if not 0 <= sl < SL_COUNT:
            raise ControlError(f"SL {sl} is not 0..{SL_COUNT - 1}")
        self._pool_sl[pool] = sl
        self._fabric_dirty = True
        self._record("set_pool_service_level", pool, f"SL {sl}")

    def pool_service_levels(self) -> dict[str, int]:
        """Service level of every pool."""
        return dict(self._pool_sl)

    # --- scheduler controls (Slurm) --------------------------------------------------------------

    def set_partition_nodes(self, pool: str, nodes: str | Sequence[str]) -> None:
        """`scontrol update PartitionName=pool Nodes=...`: the full member list (hostlist or names)."""
        names = expand_hostlist(nodes) if isinstance(nodes, str) else list(nodes)
        self.scheduler.set_partition_nodes(pool, names)
        self._record("set_partition_nodes", pool, f"{len(names)} nodes")
        self._refresh()

    def partition_nodes(self, pool: str) -> list[str]:
        """A pool's member nodes in order."""
        return [self.spec.nodes[i] for i in self.scheduler.pools[pool].members]

    def drain(self, node: str, reason: str = "drained by operator") -> None:
        """`scontrol update NodeName=node State=DRAIN`: running jobs continue, nothing new starts."""
        self.scheduler.drain(node, reason)
        self._record("drain", node, reason)

    def resume(self, node: str) -> None:
        """`scontrol update NodeName=node State=RESUME`."""
        self.scheduler.resume(node)
        self._record("resume", node, "")
        self._refresh()

    # --- faults ----------------------------------------------------------------------------------

    def inject_xid(self, node: str, gpu: int, xid: int = 79) -> None:
        """An XID error on a GPU (seen by a materialized node's XID watcher); the job keeps running."""
        self._check_gpu(node, gpu)
        self.gpu_events.setdefault(node, []).append(GpuEvent("xid", gpu, xid))
        self._record("xid", f"{node}/gpu{gpu}", f"XID {xid}")

    def lose_gpu(self, node: str, gpu: int) -> None:
        """A GPU falls off the bus: its job fails, the node drains ("gpu lost")."""
        state = self._check_gpu(node, gpu)
        state.lost.add(gpu)
        job_id = state.slots[gpu]
        if job_id != FREE and job_id in self.running:
            self._finish(self.running[job_id], FAILED)
        self.scheduler.drain(node, f"gpu {gpu} lost")
        self.gpu_events.setdefault(node, []).append(GpuEvent("lose_gpu", gpu))
        self._record("lose_gpu", f"{node}/gpu{gpu}", "lost")
        self._refresh()

    def restore_gpu(self, node: str, gpu: int) -> None:
        """A lost GPU answers again (the node stays drained until resumed)."""
        state = self._check_gpu(node, gpu)
        state.lost.discard(gpu)
        self.gpu_events.setdefault(node, []).append(GpuEvent("restore_gpu", gpu))
        self._record("restore_gpu", f"{node}/gpu{gpu}", "restored")

    def set_link(self, link: int, up: bool) -> None:
        """Take a link down (routes move to other uplinks; a host link down stalls its jobs) or up."""
        self._check_link(link)
        if self.fabric.set_link(link, up):
            self._fabric_dirty = self._routes_dirty = True
            self._record("link_up" if up else "link_down", self.link_name(link), "")
            self._refresh()

    def flap_link(self, link: int) -> None:
        """A link went down and came back."""
        self._check_link(link)
        self.fabric.flap(link)
        self._record("flap", self.link_name(link), "")

    def add_symbol_errors(self, port: int, count: int = 1) -> None:
        """Symbol errors on a port."""
        self._check_port(port)
        self.fabric.symbol_error[port] += count
        self._record("symbol_errors", self.port_name(port), f"+{count}")

    def saturate(self, port: int, counter: str = "port_xmit_wait") -> None:
        """Push a port's 32-bit (or narrower) counter to all ones, where it stays."""
        self._check_port(port)
        if counter not in ("port_xmit_wait", "symbol_error", "link_downed"):
            raise FaultError(f"{counter} does not saturate (data and packet counters are 64-bit)")
        self.fabric.saturated.add((port, counter))
        self._record("saturate", self.port_name(port), counter)

    # --- naming helpers --------------------------------------------------------------------------

    def host_link(self, node: str, rail: int = 0) -> int:
        """The link between a node's HCA port `rail` and its leaf."""
        index = self._node(node)
        if not 0 <= rail < self.spec.ports_per_node:
            raise FaultError(f"rail must be 0..{self.spec.ports_per_node - 1}")
        return self.topology.host_link[index][rail]

    def uplink(self, leaf: int, u: int) -> int:
        """The link from leaf `leaf` (0-based) uplink `u` to its spine."""
        if (
            not (0 <= leaf < self.topology.leaves and 0 <= u < self.topology.uplinks)
            or self.topology.leaves < 2
        ):
            raise FaultError(f"no uplink {u} on leaf {leaf}")
        return self.topology.uplink[leaf][u]

    def hca_port(self, node: str, rail: int = 0) -> int:
        """The port index of a node's HCA port `rail`."""
        return self.topology.hca_port[self._node(node)][rail]

    def leaf_of(self, node: str, rail: int = 0) -> int:
        """The leaf a node's HCA port `rail` is cabled to."""
        return self.topology.leaf_of(self._node(node), rail)

    def port_name(self, port: int) -> str:
        """`<node_desc>/<port>`."""
        p = self.topology.ports[port]
        return f"{p.node_desc}/{p.number}"

    def link_name(self, link: int) -> str:
        """`<a> <-> <b>`."""
        item = self.topology.links[link]
        return f"{self.port_name(item.a)}<->{self.port_name(item.b)}"

    def _node(self, node: str) -> int:
        index = self.topology.node_index.get(node)
        if index is None:
            raise FaultError(f"unknown node {node!r}")
        return index

    def _check_gpu(self, node: str, gpu: int) -> NodeState:
        state = self.scheduler.nodes[self._node(node)]
        if not 0 <= gpu < self.spec.gpus_per_node:
            raise FaultError(f"gpu must be 0..{self.spec.gpus_per_node - 1}")
        return state

    def _check_link(self, link: int) -> None:
        if not 0 <= link < len(self.topology.links):
            raise FaultError(f"no link {link}")

    def _check_port(self, port: int) -> None:
        if not 0 <= port < len(self.topology.ports):
            raise FaultError(f"no port {port}")

    def _record(self, kind: str, target: str, detail: str) -> None:
        self.events.append(ModelEvent(self.now, kind, target, detail))
        log.info("t=%.0f %s %s %s", self.now, kind, target, detail)

    # --- read side -------------------------------------------------------------------------------

    def node_load(self, node: str) -> NodeLoad:
        """What a node's GPUs and HCA ports are doing now (for `SimulatedNode`)."""
        self._refresh()
        index = self._node(node)
        state = self.scheduler.nodes[index]
        gpus = []
        for gpu, job_id in enumerate(state.slots):
            job = self.running.get(job_id) if job_id != FREE else None
            if job is None or gpu in state.lost:
                gpus.append(GpuLoad(memory_used_fraction=0.005))
                continue
            cf, busy = job.compute_fraction, job.request.gpu_intensity
            gpus.append(
                GpuLoad(
                    utilization=busy * cf + COMM_UTILIZATION * (1 - cf),
                    memory_bandwidth=0.55 * cf + 0.05 * (1 - cf),
                    sm_active=0.85 * busy * cf + 0.05 * (1 - cf),
                    tensor_active=0.6 * busy * cf,
                    memory_used_fraction=job.request.memory_fraction,
                    nvlink=0.1 + 0.4 * (1 - cf) if job.distributed else 0.2,
                )
            )
        ports = []
        for link in self.topology.host_link[index]:
            rate, wait = self.fabric.rate, self.fabric.wait
            ports.append(
                PortLoad(
                    tx_bytes_per_second=rate.get(2 * link, 0.0),
                    rx_bytes_per_second=rate.get(2 * link + 1, 0.0),
                    wait_ratio=wait.get(2 * link, 0.0),
                )
            )
        return NodeLoad(tuple(gpus), tuple(ports))

    def node_counters(self, node: str) -> tuple[views.HcaCounters, ...]:
        """The node's HCA port counters (raw bytes and ticks), one per rail."""
        self._refresh()
        return tuple(views.hca_counters(self, port) for port in self.topology.hca_port[self._node(node)])

    def scheduler_view(self) -> views.SchedulerView:
        """Pools, queues and node states."""
        self._refresh()
        return views.scheduler_view(self)

    def fabric_view(self, include_hcas: bool = True) -> views.FabricView:
        """Every port's counters and the link topology."""
        self._refresh()
        return views.fabric_view(self, include_hcas)

    def job_metrics(self, pool: str | None = None) -> list[views.JobMetrics]:
        """Running jobs' iteration times and fabric shares."""
        self._refresh()
        return views.job_metrics(self, pool)

    def flows(self) -> list[tuple[str, Flow]]:
        """Every ring step of the running distributed jobs now, with its job's pool (read only)."""
        self._refresh()
        return [(job.pool, flow) for job in self.running.values() for flow in self._flows.get(job.id, ())]

    def job_states(self) -> dict[str, int]:
        """How many jobs are pending, running, done and failed."""
        counts = {PENDING: 0, RUNNING: 0, DONE: 0, FAILED: 0}
        for job in self.jobs.values():
            counts[job.state] += 1
        return counts


def _vlarb(value: VlarbInput) -> list[tuple[int, int]]:
    if isinstance(value, str):
        return parse_vlarb(value)
    if isinstance(value, Mapping):
        return [(int(vl), int(w)) for vl, w in value.items()]
    return [(int(vl), int(w)) for vl, w in value]


def _fmt(pairs: Sequence[tuple[int, int]]) -> str:
    return ",".join(f"{vl}:{w}" for vl, w in pairs)
