"""Regenerates data/ from a real Slurm (as root): `.venv/bin/python -m tests.exporter.scheduler.capture`.

Starts the clusters of tests/integration/test_scheduler_exporter.py, applies the same scenarios, and saves
what the exporter's commands print: `gres/` (eight nodes with eight fake GPUs), `whole_nodes/` (no GRES),
and `down/` (sinfo and squeue with slurmctld stopped: exit 0 with an `errors` list; scontrol exits 1).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.integration.slurm_cluster import SlurmCluster
from tests.integration.test_scheduler_exporter import (
    INFERENCE,
    TRAINING,
    build_scenario,
    build_whole_node_scenario,
)

DATA = Path(__file__).resolve().parent / "data"
COMMANDS = {
    "sinfo.json": ("sinfo", "--json"),
    "squeue.json": ("squeue", "--all", "--json"),
    "partitions.txt": ("scontrol", "--all", "--oneliner", "show", "partitions"),
}


def _save(cluster: SlurmCluster, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name, (program, *args) in COMMANDS.items():
        result = cluster.run(program, *args, check=False, timeout=60)
        (target / name).write_text(result.stdout or result.stderr)
        print(f"{target / name}: exit {result.returncode}", file=sys.stderr)


def main() -> int:
    """Capture every data set; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="ibpool-capture-") as tmp:
        cluster = SlurmCluster(
            Path(tmp, "gres"),
            nodes=8,
            partitions={"training": TRAINING, "inference": INFERENCE},
            gpus_per_node=8,
        )
        cluster.start()
        try:
            build_scenario(cluster)
            _save(cluster, DATA / "gres")
            cluster.stop_controller()
            _save(cluster, DATA / "down")
        finally:
            cluster.stop()
        cluster = SlurmCluster(
            Path(tmp, "whole"), nodes=4, partitions={"a": ["node1", "node2"], "b": ["node3", "node4"]}
        )
        cluster.start()
        try:
            build_whole_node_scenario(cluster)
            _save(cluster, DATA / "whole_nodes")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
