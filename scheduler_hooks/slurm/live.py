"""The live cluster through its clients: typed reads, and the three changes the adapter makes."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

from proposals.targets import sorted_nodes
from scheduler_hooks.errors import CommandFailedError
from scheduler_hooks.slurm.commands import Runner
from scheduler_hooks.slurm.parse import (
    SINFO_PARTITIONS,
    SQUEUE_JOBS,
    NodeInfo,
    parse_jobs,
    parse_nodes,
    parse_partitions,
)

log = logging.getLogger(__name__)

# Whole-string patterns: always `fullmatch` (`match` with `$` lets a trailing newline through).
PARTITION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
REASON = re.compile(r"[A-Za-z0-9_.:@ -]{1,200}")
JOB_ID = re.compile(r"[0-9]{1,20}")


def _checked(names: Iterable[str], pattern: re.Pattern[str], what: str) -> list[str]:
    names = list(names)
    bad = [name for name in names if not pattern.fullmatch(name)]
    if bad:
        raise CommandFailedError(f"refused to pass {what} {bad} to scontrol")
    return names


class SlurmLive:
    """Reads partitions, nodes and jobs; sets a partition's node list; drains and resumes nodes; requeues
    jobs."""

    def __init__(self, runner: Runner) -> None:
        self._run = runner.run

    def partitions(self) -> dict[str, tuple[str, ...]]:
        """Every partition (hidden and empty ones too) -> its nodes, as sinfo counts them."""
        return parse_partitions(self._run("sinfo", "--noheader", "--all", f"--format={SINFO_PARTITIONS}"))

    def nodes(self) -> dict[str, NodeInfo]:
        """Every node slurmctld knows, in a partition or not."""
        return parse_nodes(self._run("scontrol", "--all", "--oneliner", "show", "nodes"))

    def running_jobs(self, names: Sequence[str]) -> list[str]:
        """Ids of the jobs squeue shows running (or finishing) on any of `names`, in squeue's order."""
        if not names:
            return []
        wanted = ",".join(_checked(names, NODE_NAME, "node names"))
        out = self._run("squeue", "--noheader", "--all", f"--nodelist={wanted}", f"--format={SQUEUE_JOBS}")
        return [job.job_id for job in parse_jobs(out) if job.state != "PD" and set(job.nodes) & set(names)]

    def requeue(self, job_id: str) -> None:
        """`scontrol requeue JOBID`: the job is killed and goes back to pending (its work since its last
        checkpoint is lost); a drained node takes no new job, so it does not come back there."""
        _checked([job_id], JOB_ID, "job id")
        log.info("scontrol requeue %s", job_id)
        self._run("scontrol", "requeue", job_id)

    def busy(self, names: Sequence[str]) -> list[str]:
        """Those of `names` that still run (or finish) a job, by node state and by squeue."""
        if not names:
            return []
        nodes = self.nodes()
        busy = {name for name in names if name in nodes and nodes[name].busy}
        wanted = ",".join(_checked(names, NODE_NAME, "node names"))
        out = self._run("squeue", "--noheader", "--all", f"--nodelist={wanted}", f"--format={SQUEUE_JOBS}")
        for job in parse_jobs(out):
            if job.state != "PD":
                busy.update(set(job.nodes) & set(names))
        return sorted_nodes(busy)

    def set_partition(self, partition: str, nodes: Sequence[str]) -> None:
        """`scontrol update PartitionName=P Nodes=<full list>` (names checked, never `+node`)."""
        _checked([partition], PARTITION_NAME, "partition name")
        listed = ",".join(_checked(nodes, NODE_NAME, "node names"))
        log.info("scontrol update PartitionName=%s Nodes=%s", partition, listed)
        self._run("scontrol", "update", f"PartitionName={partition}", f"Nodes={listed}")

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        """`scontrol update NodeName=... State=DRAIN Reason=...`: no new jobs, running ones go on."""
        _checked([reason], REASON, "reason")
        listed = ",".join(_checked(nodes, NODE_NAME, "node names"))
        log.info("scontrol update NodeName=%s State=DRAIN Reason=%r", listed, reason)
        self._run("scontrol", "update", f"NodeName={listed}", "State=DRAIN", f"Reason={reason}")

    def resume(self, nodes: Sequence[str]) -> None:
        """`scontrol update NodeName=... State=RESUME`."""
        listed = ",".join(_checked(nodes, NODE_NAME, "node names"))
        log.info("scontrol update NodeName=%s State=RESUME", listed)
        self._run("scontrol", "update", f"NodeName={listed}", "State=RESUME")
