"""A job's life in the model: pending, running, then done (or failed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.cluster.workload import JobRequest

PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"


@dataclass(slots=True)
class Job:
    """A submitted job and what the model knows about it now."""

    id: int
    request: JobRequest
    gpus: int  # GPUs allocated (whole nodes for a multi-node job)
    nodes_needed: int
    state: str = PENDING
    start_time: float | None = None
    end_time: float | None = None
    nodes: list[int] = field(default_factory=list)  # node indices, ring order
    gpu_slots: list[tuple[int, int]] = field(default_factory=list)  # (node, gpu)
    progress: float = 0.0  # uncontended seconds of work done
    speed: float = 1.0  # progress per second (1 when the fabric gives it all it asks)
    iteration_alone: float = 0.0  # seconds per iteration on an idle fabric
    iteration_time: float = 0.0  # seconds per iteration now (inf when stalled)
    flow_bytes: float = 0.0  # bytes one ring flow carries per iteration
    rate: float = 0.0  # bytes/s each ring flow gets now
    bottleneck: int = -1  # directed channel limiting it (-1: none)
    bottleneck_capacity: float = 0.0

    @property
    def pool(self) -> str:
        """The pool it was submitted to."""
        return self.request.pool

    @property
    def distributed(self) -> bool:
        """Whether it spans nodes (and so uses the fabric)."""
        return self.nodes_needed > 1

    @property
    def compute_fraction(self) -> float:
        """Share of wall time spent computing (the rest waits on the all-reduce)."""
        if not self.distributed:
            return 1.0
        if self.iteration_time == float("inf") or self.iteration_time <= 0:
            return 0.0
        return min(1.0, self.request.compute_seconds / self.iteration_time)

    def remaining_estimate(self) -> float:
        """Seconds to the end at the current speed (uncontended if stalled)."""
        left = max(0.0, self.request.work_seconds - self.progress)
        return left / self.speed if self.speed > 0 else left
