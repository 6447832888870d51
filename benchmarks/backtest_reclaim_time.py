"""How long a reclaim takes on a real Slurm: the figure behind the backtest's `reclaim_delay_min`.

A throwaway Slurm 22.05 on localhost (slurmctld and eight slurmd, partitions `training` node1-4 and
`inference` node5-8, Slurm's default scheduler settings). Each round: a training job runs on node4, every
inference node is busy and one more inference job waits; the Slurm adapter moves node4 to inference as a
proposal's reclaim of node4 with `reclaims: allow` (the training job is requeued at once; the configured
drain deadline, an hour with `give_up`, never comes into it). It prints, per round and as the largest:
the apply itself (drain, requeue, the job leaving, partition update, resume, read-back) and the time until
the waiting inference job runs on node4 (the owner's job start). For comparison, the same move of an idle
node by drain.

    .venv/bin/python -m benchmarks.backtest_reclaim_time [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from proposals.model import Change
from scheduler_hooks.slurm import SlurmAdapter, SlurmConfig
from simulator.backends.slurm_run import Slurm, unavailable

TRAINING = ["node1", "node2", "node3", "node4"]
INFERENCE = ["node5", "node6", "node7", "node8"]
MOVE = [
    Change("slurm.partition.inference.nodes", ",".join(INFERENCE), ",".join(["node4", *INFERENCE])),
    Change("slurm.partition.training.nodes", ",".join(TRAINING), ",".join(TRAINING[:3])),
]
BACK = [Change(c.target, c.after, c.before) for c in MOVE]


def _submit(slurm: Slurm, partition: str, *extra: str) -> str:
    out = slurm.run(
        "sbatch",
        "--parsable",
        f"--partition={partition}",
        f"--output={slurm.root / 'slurm-%j.out'}",
        f"--chdir={slurm.root}",
        *extra,
        "--wrap",
        "sleep 600",
    ).stdout
    return out.strip().split(";")[0]


def _state(slurm: Slurm, job: str) -> tuple[str, str]:
    out = slurm.run("squeue", "--noheader", f"--jobs={job}", "--format=%T %N", check=False).stdout.split()
    return (out[0], out[1] if len(out) > 1 else "") if out else ("", "")


def _until(check: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError("waited too long")
        time.sleep(0.1)
    return time.monotonic() - start


def _round(slurm: Slurm, adapter: SlurmAdapter) -> tuple[float, float]:
    """One reclaim: (apply seconds, seconds until the waiting owner job runs on node4)."""
    job = _submit(slurm, "training", "--nodelist=node4")
    fillers = [_submit(slurm, "inference", "--exclusive") for _ in INFERENCE]
    _until(lambda: all(_state(slurm, j)[0] == "RUNNING" for j in [job, *fillers]), 60)
    owner = _submit(slurm, "inference", "--exclusive")
    _until(lambda: _state(slurm, owner)[0] == "PENDING", 60)
    start = time.monotonic()
    record = adapter.apply(MOVE, proposal="reclaim-timing", reclaim=["node4"])
    applied = time.monotonic() - start
    if not record.ok:
        raise RuntimeError(f"the move did not apply: {record.outcome}")
    _until(lambda: _state(slurm, owner) == ("RUNNING", "node4"), 180)
    started = time.monotonic() - start
    slurm.run("scancel", "--quiet", "--user=root", check=False)
    _until(lambda: not slurm.squeue_ids(), 60)
    adapter.apply(BACK, proposal="reclaim-timing-back")
    slurm.wait_idle(timeout=60)
    return applied, started


def main(argv: list[str]) -> int:
    """Start the cluster, time the rounds, print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    missing = unavailable()
    if missing:
        print(f"cannot start Slurm here: {missing}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        partitions = {"training": TRAINING, "inference": INFERENCE}
        slurm = Slurm(Path(tmp), TRAINING + INFERENCE, partitions, cpus_per_node=2, scheduler_parameters="")
        slurm.start()
        try:
            reclaim = SlurmAdapter(SlurmConfig(slurm.conf_path, reclaims="allow", poll_interval_seconds=0.2))
            rounds = [_round(slurm, reclaim) for _ in range(args.rounds)]
            drain = SlurmAdapter(SlurmConfig(slurm.conf_path, poll_interval_seconds=0.2))
            start = time.monotonic()
            drain.apply(MOVE, proposal="idle-timing")
            idle = time.monotonic() - start
        finally:
            slurm.stop()
    for i, (applied, started) in enumerate(rounds, 1):
        print(f"reclaim {i}: apply {applied:.1f} s, owner's job running on the node after {started:.1f} s")
    applied, started = max(a for a, _ in rounds), max(s for _, s in rounds)
    print(
        f"largest: apply {applied:.1f} s, owner's job start {started:.1f} s (the backtest's "
        f"reclaim_delay_min: 2 minutes); moving an idle node by drain: {idle:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
