"""Captured Slurm outputs (data/, see capture.py) and fake `sinfo`, `squeue`, `scontrol` that print them."""

from __future__ import annotations

import shutil
from pathlib import Path

from exporter.scheduler.model import ClusterState
from exporter.scheduler.parse import parse_partition_names, parse_sinfo_nodes, parse_squeue_jobs

DATA = Path(__file__).resolve().parent / "data"
# Fake clients print the file of their name from the directory of $SLURM_CONF (so that the test also
# sees SLURM_CONF being passed); scontrol exits 1 when its file starts with `slurm_load_partitions error`.
_SCRIPT = {
    "sinfo": 'exec cat "$(dirname "$SLURM_CONF")/sinfo.json"\n',
    "squeue": 'exec cat "$(dirname "$SLURM_CONF")/squeue.json"\n',
    "scontrol": (
        'f="$(dirname "$SLURM_CONF")/partitions.txt"\n'
        'if grep -q "^slurm_load_partitions error" "$f"; then cat "$f" >&2; exit 1; fi\n'
        'exec cat "$f"\n'
    ),
}


def read(case: str, name: str) -> str:
    """One captured output, e.g. read("gres", "squeue.json")."""
    return (DATA / case / name).read_text()


def cluster_state(case: str) -> ClusterState:
    """The parsed capture of `case` (gres or whole_nodes)."""
    return ClusterState(
        tuple(parse_sinfo_nodes(read(case, "sinfo.json"))),
        tuple(parse_squeue_jobs(read(case, "squeue.json"))),
        tuple(parse_partition_names(read(case, "partitions.txt"))),
    )


class FakeSlurm:
    """A bin directory of fake clients and a data directory holding slurm.conf and the outputs to print."""

    def __init__(self, root: Path, case: str = "gres") -> None:
        self.bin_dir = root / "bin"
        self.data_dir = root / "etc"
        self.bin_dir.mkdir(parents=True)
        self.data_dir.mkdir(parents=True)
        self.conf = self.data_dir / "slurm.conf"
        self.conf.write_text("# fake\n")
        for name, body in _SCRIPT.items():
            self.write_program(name, body)
        self.use(case)

    def write_program(self, name: str, body: str) -> Path:
        """Replace fake program `name` with a shell script of `body`."""
        path = self.bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return path

    def use(self, case: str) -> None:
        """Serve the captured outputs of `case` (gres, whole_nodes, down) from now on."""
        for name in ("sinfo.json", "squeue.json", "partitions.txt"):
            shutil.copyfile(DATA / case / name, self.data_dir / name)

    def write(self, name: str, text: str) -> None:
        """Serve `text` as output file `name` from now on."""
        (self.data_dir / name).write_text(text)
