"""A Slurm cluster on localhost for the model: munged, slurmctld and one `slurmd -N` per model node.

Starting and stopping is `simulator.backends.slurm_run.Slurm`'s (free loopback ports, a unique
ClusterName, every file under one directory, fake GPUs as /dev/null symlinks, every daemon stopped in every
exit path). Partitions and GPUs come from `slurm_layout(model)`. munged is started (as user munge) only
when none answers, and then stopped by `stop()`.
"""

from __future__ import annotations

from pathlib import Path

from simulator.backends import SlurmLayout
from simulator.backends.processes import StartStop
from simulator.backends.slurm_run import Slurm


class RealSlurm(StartStop):
    """slurmctld plus one slurmd per node of `layout`, in `root`."""

    def __init__(self, root: Path, layout: SlurmLayout) -> None:
        self.layout = layout
        self.cluster = Slurm(
            root,
            layout.nodes,
            layout.partitions,
            gpus_per_node=layout.gpus_per_node,
            cluster_prefix="ibpdemo",
            stop_munged=True,
        )
        self.root = self.cluster.root
        self.conf_path = self.cluster.conf_path
        self.log_dir = self.cluster.log_dir
        self.env = self.cluster.env

    def start(self, timeout: float = 60.0) -> None:
        """munged if needed, the config, slurmctld, every slurmd; waits until every node is idle."""
        self.cluster.start(timeout)

    def run(self, *argv: str, timeout: float = 15.0) -> str:
        """A Slurm client command against this cluster; its stdout, SlurmError (a RealError) on failure."""
        return self.cluster.run(argv[0], *argv[1:], timeout=timeout).stdout

    def stop(self) -> None:
        """Every slurmd, then slurmctld, then munged when this started it; idempotent."""
        self.cluster.stop()
