"""`ibpool demo`: the closed loop on one machine, one command, no servers needed, and what it proved.

    ibpool demo [--fast] [--out DIR] [--seed N] [--quiet] [--real]   (python -m demo.cli ... works too)

One simulated day (`--fast`: its first six hours) on 16 nodes (`demo.scenario`): pools `recsys` (high
priority, busy by day) and `llm` (busy by night) interleaved on both leaves of a 4:1 fat tree, a congestion
episode (an all-reduce heavy job in each pool on the shared uplinks), a GPU that reports XID 79 and falls
off the bus. Modules, one job each:

- `scenario`, `settings`: the cluster, its demand and scripted events; the timings (a cycle every 10 min);
- `loop`: the run itself (the real exporters served by `ClusterServer`, the recommender on the embedded
  source, auto-approval by demo/approval.yaml, the real apply orchestrator with the simulated sides, or
  the real OpenSM and Slurm sides with `--real`); `observe` writes its CSV series, `series` records what
  the exporters served for the alert replay, `record` the run directory and timeline;
- `controls`, `measure`, `twin`: every change to the model is logged, so the run replays without the loop
  (the static twin: same seed, demand, jobs and faults) and each change with and without itself (its
  counterfactual), all measured on the model the same way;
- `alert_replay`: the shipped rule files (alerts/*.yml) replayed by vmalert over the recorded series
  (`postmortem.replay`); no alert condition is evaluated in Python; without vmalert it says so;
- `report`: the summary, led by the loop against the static twin; `cli`: the command.

Time: the model's clock only moves when the loop advances it; every reader uses simulated time, which
starts at 06:00 UTC the day before the run and is the one clock of the console and the report. The run is
deterministic for a seed. The run directory (`--out`) is described in `demo.record`; `ibpool postmortem
--run DIR` turns it into the HTML report (written there as report.html at the end). docs/demo.md has the
method and the figures.
"""
