"""`ibpool scheduler-exporter`: Slurm pools (partitions), their GPUs, queues and node states.

Modules, one job each: `commands` runs the Slurm clients, `parse` turns their output into `model` records
(with `gres`, `hostlist` and `states` for the small formats), `pools` aggregates per pool, `poller`
polls in the background and caches, `collector` maps the cache to metric families, `config` and `main`
make the command.
"""
