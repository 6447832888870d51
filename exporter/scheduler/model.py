"""What one poll of Slurm found: frozen records of nodes, jobs and partitions."""

from __future__ import annotations

from dataclasses import dataclass

# Job states in which a job holds its allocation (its GPUs count as allocated).
ACTIVE_JOB_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT"})


@dataclass(frozen=True)
class Node:
    """A node: normalised state (see states.py), the partitions it belongs to, GPUs in its GRES."""

    name: str
    state: str
    partitions: tuple[str, ...]
    gres_gpus: int


@dataclass(frozen=True)
class Job:
    """One squeue record.

    `gpus` is what the record holds (active jobs: GPUs allocated) or asks for (pending jobs: GPUs
    requested), per job, from GRES/TRES; 0 when no GPU GRES is involved. `count` is how many jobs the
    record stands for: a pending job array is one record for all its pending tasks.
    """

    job_id: int
    partitions: tuple[str, ...]
    state: str
    node_count: int
    nodes: tuple[str, ...]
    gpus: int
    count: int = 1

    @property
    def active(self) -> bool:
        """True while the job holds an allocation (running, configuring, completing, suspended)."""
        return self.state in ACTIVE_JOB_STATES


@dataclass(frozen=True)
class ClusterState:
    """Everything one poll read: every node, every job record, every partition (empty ones too)."""

    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    partitions: tuple[str, ...]
