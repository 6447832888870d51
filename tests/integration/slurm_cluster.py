"""A throwaway Slurm cluster on localhost for integration tests (docs/architecture.md §6).

    cluster = SlurmCluster(tmp, nodes=8, partitions={"training": ["node1", ...], ...}, gpus_per_node=8)
    cluster.start()
    job = cluster.submit("training", nodes=2, gpus_per_node=8)
    cluster.wait_job_state(job, "RUNNING")

Starting and stopping is `simulator.backends.slurm_run.Slurm`'s (docs/simulator.md); this adds the test
helpers, `job_mapping=True` (the shipped prolog and epilog installed as docs/deploy.md says, each node
writing its own `job_map_directory`) and `distinct_hostnames=True` (node K's NodeHostname 127.0.0.(K+1)).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from simulator.backends.errors import SlurmError
from simulator.backends.processes import free_ports, poll_until
from simulator.backends.slurm_run import MUNGE_DIR, MUNGE_KEY, PROGRAMS, Slurm, ensure_munged, unavailable
from tests.integration.processes import REPO

__all__ = [
    "MUNGE_DIR",
    "MUNGE_KEY",
    "PROGRAMS",
    "SlurmCluster",
    "SlurmClusterError",
    "ensure_munged",
    "free_ports",
    "slurm_skip_reason",
    "wait_until",
]

SlurmClusterError = SlurmError  # the test cluster could not be started, or a command against it failed
SLURM_SCRIPTS = REPO / "deploy" / "slurm"


def slurm_skip_reason() -> str | None:
    """Why a SlurmCluster cannot run on this machine, or None when it can."""
    return unavailable()


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll `predicate` until it is true; raise SlurmClusterError naming `what` after `timeout` seconds."""
    poll_until(predicate, timeout, what, interval, SlurmError)


class SlurmCluster(Slurm):
    """slurmctld plus `nodes` slurmd on localhost; see the module docstring and docs/simulator.md."""

    def __init__(
        self,
        root: Path,
        *,
        nodes: int = 8,
        partitions: Mapping[str, Sequence[str]] | None = None,
        gpus_per_node: int = 0,
        cpus_per_node: int = 8,
        scheduler_parameters: str = "batch_sched_delay=0",
        extra_conf: Sequence[str] = (),
        node_names: Sequence[str] | None = None,
        job_mapping: bool = False,
        distinct_hostnames: bool = False,
    ) -> None:
        if node_names is None:
            if not 1 <= nodes <= 64:
                raise ValueError("nodes must be between 1 and 64")
            node_names = [f"node{i}" for i in range(1, nodes + 1)]
        self.distinct_hostnames = distinct_hostnames
        if job_mapping:
            extra_conf = [*extra_conf, *self._job_mapping_conf(Path(root).resolve())]
        super().__init__(
            root,
            node_names,
            partitions,
            gpus_per_node=gpus_per_node,
            cpus_per_node=cpus_per_node,
            scheduler_parameters=scheduler_parameters,
            extra_conf=extra_conf,
        )

    @staticmethod
    def _job_mapping_conf(root: Path) -> list[str]:
        """slurm.conf lines running the shipped prolog and epilog through per-cluster wrappers.

        All slurmd share this host, so each node writes its own directory: the documented wrapper
        (docs/deploy.md) sets IBPOOL_JOBS_DIRECTORY with `%n`.
        """
        root.mkdir(parents=True, exist_ok=True)
        lines = []
        for key, script in (("Prolog", "ibpool-prolog"), ("Epilog", "ibpool-epilog")):
            wrapper = root / script
            wrapper.write_text(
                f'#!/bin/sh\nIBPOOL_JOBS_DIRECTORY="{root}/job-map/%n" exec {SLURM_SCRIPTS / script}\n'
            )
            wrapper.chmod(0o755)
            lines.append(f"{key}={wrapper}")
        return [*lines, "PrologFlags=Alloc"]

    def node_hostname(self, node: str) -> str:
        """127.0.0.(K+1) for the K-th node with `distinct_hostnames`, else localhost.

        slurmd still listens on 127.0.0.1 (its NodeAddr); the distinct host names let a per-node service (a
        node exporter) listen on the same port at each node's own host name, as on real hosts.
        """
        if not self.distinct_hostnames:
            return super().node_hostname(node)
        return f"127.0.0.{self.node_names.index(node) + 2}"

    def job_map_directory(self, node: str) -> Path:
        """Where the prolog writes `node`'s GPU-to-job mapping (with `job_mapping=True`)."""
        return self.root / "job-map" / node

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    # --- commands ---------------------------------------------------------------------------------

    def scontrol(self, *args: str, timeout: float = 30.0) -> str:
        """`scontrol ARGS` against this cluster; its stdout."""
        return self.run("scontrol", *args, timeout=timeout).stdout

    def submit(
        self,
        partition: str | Sequence[str],
        *,
        nodes: int = 1,
        gpus_per_node: int = 0,
        gpus: int = 0,
        seconds: int = 600,
        nodelist: Sequence[str] = (),
        exclusive: bool = False,
        hold: bool = False,
        array: str | None = None,
        extra: Sequence[str] = (),
    ) -> int:
        """`sbatch --wrap 'sleep SECONDS'` with the given request; returns the job id."""
        parts = partition if isinstance(partition, str) else ",".join(partition)
        args = [
            "--parsable",
            f"--partition={parts}",
            f"--nodes={nodes}",
            f"--output={self.root / 'jobs' / '%j.out'}",
            f"--chdir={self.root / 'jobs'}",
            "--job-name=ibpool-test",
        ]
        if gpus_per_node:
            args.append(f"--gres=gpu:{gpus_per_node}")
        if gpus:
            args.append(f"--gpus={gpus}")
        if nodelist:
            args.append(f"--nodelist={','.join(nodelist)}")
        if exclusive:
            args.append("--exclusive")
        if hold:
            args.append("--hold")
        if array:
            args.append(f"--array={array}")
        args.extend(extra)
        args.extend(["--wrap", f"sleep {int(seconds)}"])
        out = self.run("sbatch", *args).stdout.strip()
        job_id = out.split(";")[0]
        if not job_id.isdigit():
            raise SlurmClusterError(f"sbatch printed {out!r}, not a job id")
        return int(job_id)

    def job_states(self) -> dict[int, str]:
        """Job id -> state (PENDING, RUNNING, ...) for every job squeue lists (array records by their id)."""
        out = self.run("squeue", "--noheader", "--format=%A %T", timeout=10).stdout
        states: dict[int, str] = {}
        for line in out.splitlines():
            job_id, _, state = line.strip().partition(" ")
            if job_id.isdigit():
                states[int(job_id)] = state.strip()
        return states

    def partition_members(self) -> dict[str, list[str]]:
        """Partition -> member nodes as slurmctld has them now (read back, not the config we wrote)."""
        out = self.run("scontrol", "--oneliner", "show", "partitions", timeout=10).stdout
        members: dict[str, list[str]] = {
            line.split()[0].removeprefix("PartitionName="): []
            for line in out.splitlines()
            if line.startswith("PartitionName=")
        }
        out = self.run("sinfo", "--noheader", "--Node", "--format=%N %R", timeout=10).stdout
        for line in out.splitlines():
            node, _, partition = line.strip().partition(" ")
            if partition:
                members.setdefault(partition, []).append(node)
        return members

    def wait_job_state(self, job_id: int, state: str, timeout: float = 60.0) -> None:
        """Wait until squeue lists `job_id` in `state` (e.g. RUNNING, PENDING)."""
        wait_until(lambda: self.job_states().get(job_id) == state, timeout, f"job {job_id} {state}", 0.1)

    def queue_behind_full(self, partition: str, nodes: int, seconds: int = 600) -> int:
        """Fill each of `partition`'s `nodes` nodes with an exclusive job (all running), then submit one more
        that waits for a node: its id, once PENDING."""
        fillers = [self.submit(partition, seconds=seconds, exclusive=True) for _ in range(nodes)]
        for filler in fillers:
            self.wait_job_state(filler, "RUNNING", timeout=20)
        waiting = self.submit(partition, seconds=seconds, exclusive=True)
        self.wait_job_state(waiting, "PENDING", timeout=20)
        return waiting

    def set_node_state(self, nodes: Sequence[str], state: str, reason: str = "ibpool test") -> None:
        """`scontrol update NodeName=... State=... Reason=...` (DRAIN, DOWN, RESUME, FAIL, ...)."""
        args = [f"NodeName={','.join(nodes)}", f"State={state}"]
        if state.upper() != "RESUME":
            args.append(f"Reason={reason}")
        self.scontrol("update", *args)
