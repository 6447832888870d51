"""The model's scheduler as the scheduler exporter's `ClusterState`, summarised by its real `summarise`.

`cluster_state` builds what the Slurm parsers produce from `sinfo`/`squeue`/`scontrol` (docs/simulator.md),
so the pool figures follow the exporter's own rules (docs/scheduler-exporter.md). `SimulatedSlurm.read` is
the poller's `read`; `available = False` makes it fail as an unreachable slurmctld does, so the collector
stops serving pool series and `ibpool_scheduler_up` drops to 0.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.scheduler.errors import SlurmReportedError
from exporter.scheduler.model import ClusterState, Job, Node
from exporter.scheduler.pools import SchedulerSnapshot, summarise
from simulator.cluster.model import ClusterModel


def cluster_state(model: ClusterModel) -> ClusterState:
    """Nodes, job records and partitions of the model now (call it under the model's lock)."""
    view = model.scheduler_view()
    names = model.spec.nodes
    nodes = tuple(Node(n.name, n.state, n.pools, n.gpus) for n in view.nodes.values())
    jobs: list[Job] = []
    for job in sorted(model.running.values(), key=lambda j: j.id):
        hosts = tuple(names[i] for i in job.nodes)
        jobs.append(Job(job.id, (job.pool,), "RUNNING", len(hosts), hosts, job.gpus))
    for pool in view.pools:
        for job in model.scheduler.pending_jobs(pool, model.jobs):
            jobs.append(Job(job.id, (pool,), "PENDING", job.nodes_needed, (), job.gpus))
    return ClusterState(nodes, tuple(jobs), tuple(view.pools))


class SimulatedSlurm:
    """The scheduler poller's source over a model; `available` says whether slurmctld answers."""

    def __init__(self, read_state: Callable[[], ClusterState]) -> None:
        self._read_state = read_state
        self.available = True

    def read(self) -> SchedulerSnapshot:
        """One poll: the model's state, summarised by the exporter's own rules."""
        if not self.available:
            raise SlurmReportedError("Unable to contact slurm controller (simulated: slurmctld down)")
        return summarise(self._read_state())
