"""Slurm adapter: move nodes between partitions (pools) without killing work, verified and reversible.

Modules, one job each: `config` (settings), `commands` (runs the clients), `parse` (their output),
`live` (reads and the three changes), `plan` (changes -> problems, stale targets, plans), `slurmconf`
(keeps slurm.conf in step), `record` (steps for audit and recovery), `adapter` (the sequence).
"""

from scheduler_hooks.slurm.adapter import SlurmAdapter
from scheduler_hooks.slurm.config import SlurmConfig
from scheduler_hooks.slurm.record import ApplyRecord, Outcome, PartitionPlan, Step

__all__ = ["ApplyRecord", "Outcome", "PartitionPlan", "SlurmAdapter", "SlurmConfig", "Step"]
