"""One poll of Slurm: run the commands, parse their output, aggregate per pool."""

from __future__ import annotations

from typing import Protocol

from exporter.scheduler.model import ClusterState
from exporter.scheduler.parse import parse_partition_names, parse_sinfo_nodes, parse_squeue_jobs
from exporter.scheduler.pools import SchedulerSnapshot, summarise


class SlurmSource(Protocol):
    """What the reader needs from Slurm: the raw output of three commands (SlurmCommands is one)."""

    def nodes_json(self) -> str:
        """`sinfo --json` output."""
        ...

    def jobs_json(self) -> str:
        """`squeue --json` output."""
        ...

    def partitions_text(self) -> str:
        """`scontrol --oneliner show partitions` output."""
        ...


class SlurmReader:
    """Reads a SlurmSource into a SchedulerSnapshot; any SchedulerError fails the whole poll."""

    def __init__(self, source: SlurmSource, gpus_per_node: int | None = None, gres_name: str = "gpu") -> None:
        self._source = source
        self._gpus_per_node = gpus_per_node
        self._gres_name = gres_name

    def read_state(self) -> ClusterState:
        """Run the three commands (stopping at the first failure) and parse them."""
        nodes = parse_sinfo_nodes(self._source.nodes_json(), self._gres_name)
        jobs = parse_squeue_jobs(self._source.jobs_json(), self._gres_name)
        partitions = parse_partition_names(self._source.partitions_text())
        return ClusterState(tuple(nodes), tuple(jobs), tuple(partitions))

    def read(self) -> SchedulerSnapshot:
        """One poll, aggregated."""
        return summarise(self.read_state(), self._gpus_per_node)
