"""Collectors: each turns one source's snapshot into metric families and does nothing else."""
