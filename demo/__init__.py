"""`ibpool demo`: the closed loop on one machine, one command, no servers needed.

    ibpool demo [--fast] [--out DIR] [--seed N] [--quiet] [--real]   (python -m demo.cli ... works too)

What runs, all in one process, each piece the real one except the cluster itself:
- a simulated cluster (`demo.scenario`): 32 nodes of 8 GPUs on a fat tree whose leaf uplinks are 4:1
  oversubscribed, pools `recsys` (high priority) and `llm` interleaved on every leaf, day/night demand,
  a congestion episode (an all-reduce heavy job in each pool on the shared uplinks) and a GPU that falls
  off the bus;
- served by the in-process `ClusterServer` (the real node, fabric and scheduler exporters on one port);
- the recommender (`recommender.cycle.Recommender`: rebalance and bandwidth-quota policies) on the embedded
  signals source, which scrapes those exporters;
- auto-approval by `demo/approval.yaml` (`policy:demo`; the proposer is the recommender's policy);
- the apply orchestrator (`scheduler_hooks.apply.orchestrator`) with the simulated sides
  (`simulator.backends.simulated_side`): changes go in over the server's HTTP controls the way OpenSM and
  Slurm take them, and are verified by reading back.

While it runs it prints one line per event (scripted jobs, faults, alert-like conditions firing and
resolving, proposals, approvals, applies) and a status line every few cycles; at the end a summary of
what was seen, proposed and applied, and for each applied change the pools' utilization, queue (pending
GPUs, pending GPU-minutes per hour) and the high-priority pool's multi-node iteration time and slowdown
before and after it (`demo.effects`).

Timings (`demo.settings`) are compressed: the default runs three simulated hours paced at 75 simulated
seconds per wall second (a few minutes); `--fast` runs one simulated hour unpaced (under a minute). The
recommender's persistence, history and cooldown windows are shortened to match; the approval bounds are not.

Time: the model's clock only moves when the demo loop advances it (the server runs at speed 0), and every
reader uses simulated time (`start + model time`): exporter sweep and poll timestamps, rate windows, the
proposal store's clock. So the run is deterministic for a seed and as fast as the machine allows.

The run directory (`--out`, default a new temporary directory, printed at the end) is the seam for
`ibpool postmortem`; its files are described in `demo.record` (timeline.json/jsonl, series/pools.csv,
series/links.csv, series/qos.csv, proposals.json with audit log and apply steps, effects.json,
summary.json, summary.txt, ibpool.db, demo.log).

`--real` (root, with ibsim, OpenSM, the infiniband diagnostics, Slurm and munge installed; otherwise it
names what is missing and exits 2) runs the same loop on a smaller cluster (8 nodes, `demo.real.scenario`)
with the real apply sides: OpenSMAdapter on an OpenSM it starts on ibsim, SlurmAdapter on a Slurm it starts
on localhost, the model mirrored into ibsim every cycle and fed back from both after every applied change;
everything it started is stopped at the end, on errors and on Ctrl-C too (see `demo.real`).
"""
