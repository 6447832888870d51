"""Slurm-like scheduling: per-pool FIFO queues with EASY backfill, node states, drain, partition lists.

A job asking for more GPUs than a node has gets whole nodes (rounded up); a smaller job gets GPUs on one node
(best fit). The first job of a pool's queue that does not fit gets a reservation: the earliest time enough
GPUs free up, judged from running jobs' remaining work at their current speed, and the nodes it would take
then. Later jobs start now if they fit and either end before that time or stay off the reserved nodes
(at most `backfill_depth` of them are tried per pass). Partitions may overlap, as in Slurm; removing a busy
node from a partition never stops its jobs. Only a pool whose queue or nodes changed is scheduled again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from simulator.cluster.errors import ControlError
from simulator.cluster.jobs import PENDING, RUNNING, Job

log = logging.getLogger(__name__)

FREE = -1


@dataclass(slots=True)
class NodeState:
    """One node as the scheduler sees it."""

    name: str
    slots: list[int]  # job id per GPU, FREE when idle
    lost: set[int] = field(default_factory=set)  # GPUs that fell off the bus
    drain: bool = False
    reason: str = ""
    down: bool = False
    jobs: set[int] = field(default_factory=set)
    used: int = 0  # GPUs allocated to jobs

    @property
    def free(self) -> int:
        """GPUs a new job could get (idle and not lost)."""
        if not self.lost:
            return len(self.slots) - self.used
        return sum(1 for i, s in enumerate(self.slots) if s == FREE and i not in self.lost)

    @property
    def usable(self) -> bool:
        """Whether the scheduler may place new work here."""
        return not self.drain and not self.down

    @property
    def state(self) -> str:
        """Slurm-style state: down, drained, draining, allocated, mixed or idle."""
        used = self.used
        if self.down:
            return "down"
        if self.drain:
            return "draining" if used else "drained"
        if used == 0:
            return "idle"
        return "allocated" if used == len(self.slots) else "mixed"


@dataclass(slots=True)
class PoolState:
    """One pool (partition): members in node order, its FIFO queue and its running jobs."""

    name: str
    members: list[int]
    queue: list[int] = field(default_factory=list)
    running: set[int] = field(default_factory=set)
    member_set: set[int] = field(default_factory=set)

    def set_members(self, members: Iterable[int]) -> None:
        """Replace the member list (kept sorted, with a set for lookups)."""
        self.members = sorted(set(members))
        self.member_set = set(self.members)


class Scheduler:
    """Nodes, pools and the placement of jobs on them."""

    def __init__(
        self,
        nodes: Iterable[str],
        pools: Mapping[str, Iterable[str]],
        gpus_per_node: int,
        backfill_depth: int = 50,
    ) -> None:
        self.gpus_per_node = gpus_per_node
        self.backfill_depth = backfill_depth
        self.nodes = [NodeState(name, [FREE] * gpus_per_node) for name in nodes]
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.pools: dict[str, PoolState] = {}
        for name, members in pools.items():
            self.pools[name] = PoolState(name, [])
            self.pools[name].set_members(self.index[m] for m in members)
        self.dirty: set[str] = set(self.pools)

    # --- queue -----------------------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Queue a job in its pool."""
        pool = self.pools.get(job.pool)
        if pool is None:
            raise ControlError(f"job {job.id}: unknown pool {job.pool!r}")
        pool.queue.append(job.id)
        self.dirty.add(job.pool)

    def release(self, job: Job) -> None:
        """Free a running job's GPUs."""
        for node, gpu in job.gpu_slots:
            state = self.nodes[node]
            if state.slots[gpu] == job.id:
                state.slots[gpu] = FREE
                state.used -= 1
            state.jobs.discard(job.id)
        self.pools[job.pool].running.discard(job.id)
        self._touch_nodes({n for n, _ in job.gpu_slots})

    def schedule(self, now: float, jobs: Mapping[int, Job]) -> list[Job]:
        """Start what fits in every pool that changed; returns the jobs started."""
        started: list[Job] = []
        for name in sorted(self.dirty):
            started += self._schedule_pool(self.pools[name], now, jobs)
        self.dirty.clear()
        return started

    # --- controls --------------------------------------------------------------------------------

    def node(self, name: str) -> NodeState:
        """The node called `name`."""
        try:
            return self.nodes[self.index[name]]
        except KeyError:
            raise ControlError(f"unknown node {name!r}") from None

    def drain(self, name: str, reason: str = "drained") -> None:
        """Stop placing work on a node; its running jobs continue."""
        state = self.node(name)
        state.drain, state.reason = True, reason

    def resume(self, name: str) -> None:
        """Allow work on a drained node again."""
        state = self.node(name)
        state.drain, state.reason = False, ""
        self._touch_nodes({self.index[name]})

    def set_down(self, name: str, down: bool) -> None:
        """Mark a node down (unreachable) or back up."""
        self.node(name).down = down
        self._touch_nodes({self.index[name]})

    def set_partition_nodes(self, pool: str, names: Iterable[str]) -> None:
        """Replace a pool's member list (validated first: an unknown name changes nothing)."""
        if pool not in self.pools:
            raise ControlError(f"unknown pool {pool!r}")
        wanted = list(names)
        unknown = [n for n in wanted if n not in self.index]
        if unknown:
            raise ControlError(f"pool {pool}: unknown nodes {', '.join(unknown)}")
        self.pools[pool].set_members(self.index[n] for n in wanted)
        self.dirty.add(pool)

    def pools_of(self, node: int) -> list[str]:
        """Pools that list `node` as a member."""
        return [p.name for p in self.pools.values() if node in p.member_set]

    def _touch_nodes(self, nodes: set[int]) -> None:
        for pool in self.pools.values():
            if not pool.queue or pool.name in self.dirty:
                continue
            if not nodes.isdisjoint(pool.member_set):
                self.dirty.add(pool.name)

    # --- placement -------------------------------------------------------------------------------

    def _schedule_pool(self, pool: PoolState, now: float, jobs: Mapping[int, Job]) -> list[Job]:
        if not pool.queue:
            return []
        free = {n: self.nodes[n].free for n in pool.members if self.nodes[n].usable}
        hist = [0] * (self.gpus_per_node + 1)
        for f in free.values():
            hist[f] += 1
        started: list[Job] = []
        shadow: float | None = None
        reserved: set[int] = set()
        tried = 0
        for job_id in list(pool.queue):
            job = jobs[job_id]
            if hist[0] == len(free):
                break
            fits_now = self._may_fit(job, hist)
            if shadow is None:
                placement = self._fit(job, free, set()) if fits_now else None
                if placement is None:
                    shadow, reserved = self._reserve(job, pool, free, now, jobs)
                    continue
            else:
                tried += 1
                if tried > self.backfill_depth:
                    break
                if not fits_now:
                    continue
                ends_in_time = now + job.request.work_seconds <= shadow
                placement = self._fit(job, free, set() if ends_in_time else reserved)
                if placement is None:
                    continue
            self._start(job, pool, placement, free=free, hist=hist, now=now)
            started.append(job)
        return started

    def _may_fit(self, job: Job, hist: list[int]) -> bool:
        """A cheap necessary condition for `_fit`, from the histogram of free GPUs per node."""
        per_node = self.gpus_per_node
        if job.nodes_needed > 1 or job.gpus == per_node:
            return hist[per_node] >= job.nodes_needed
        return any(hist[f] for f in range(job.gpus, per_node + 1))

    def _fit(self, job: Job, free: Mapping[int, int], avoid: set[int]) -> list[tuple[int, int]] | None:
        """(node, GPUs) pairs for `job`, or None when it does not fit now."""
        per_node = self.gpus_per_node
        if job.nodes_needed > 1 or job.gpus == per_node:
            chosen = [n for n, f in free.items() if f == per_node and n not in avoid]
            if len(chosen) < job.nodes_needed:
                return None
            return [(n, per_node) for n in chosen[: job.nodes_needed]]
        best, best_free = -1, per_node + 1
        for n, f in free.items():
            if job.gpus <= f < best_free and n not in avoid:
                best, best_free = n, f
                if f == job.gpus:
                    break
        return None if best < 0 else [(best, job.gpus)]

    def _reserve(
        self, head: Job, pool: PoolState, free: Mapping[int, int], now: float, jobs: Mapping[int, Job]
    ) -> tuple[float, set[int]]:
        """When `head` could start, and on which nodes, as running jobs end at their current speed."""
        future = dict(free)
        ending: dict[int, Job] = {}
        for n in future:
            for job_id in self.nodes[n].jobs:
                ending[job_id] = jobs[job_id]
        for job in sorted(ending.values(), key=lambda j: (now + j.remaining_estimate(), j.id)):
            for n, gpu in job.gpu_slots:
                if n in future and gpu not in self.nodes[n].lost:
                    future[n] += 1
            placement = self._fit(head, future, set())
            if placement is not None:
                return now + job.remaining_estimate(), {n for n, _ in placement}
        return float("inf"), set()

    def _start(
        self,
        job: Job,
        pool: PoolState,
        placement: list[tuple[int, int]],
        *,
        free: dict[int, int],
        hist: list[int],
        now: float,
    ) -> None:
        job.state, job.start_time = RUNNING, now
        job.nodes, job.gpu_slots = [], []
        for n, count in placement:
            state = self.nodes[n]
            taken = [i for i, s in enumerate(state.slots) if s == FREE and i not in state.lost][:count]
            state.used += len(taken)
            for gpu in taken:
                state.slots[gpu] = job.id
                job.gpu_slots.append((n, gpu))
            state.jobs.add(job.id)
            job.nodes.append(n)
            hist[free[n]] -= 1
            free[n] -= count
            hist[free[n]] += 1
        pool.queue.remove(job.id)
        pool.running.add(job.id)
        log.debug("job %d (%s, %d GPUs) started on %d nodes", job.id, job.pool, job.gpus, len(job.nodes))

    def pending_jobs(self, pool: str, jobs: Mapping[int, Job]) -> list[Job]:
        """A pool's queue in order."""
        return [jobs[j] for j in self.pools[pool].queue if jobs[j].state == PENDING]
