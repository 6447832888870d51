"""Apply orchestration: one approved proposal, across OpenSM and Slurm, verified, audited, reversible.

Modules, one job each: `config` (the apply config file), `sides` (what the orchestrator needs from a
system; grouping of changes), `opensm_side` / `slurm_side` (the adapters behind it), `simulated_side`
(the simulated cluster's controls, for `ibpool demo`), `progress` (how far
an apply got, from its step records), `orchestrator` (the sequence, rollback and recovery), `dryrun`
(the plan, changing nothing), `metrics` (`ibpool_changes_applied_total` from the audit log), `cli`
(`ibpool apply`). This package file imports nothing, so `metrics` can be used without the adapters.
"""
