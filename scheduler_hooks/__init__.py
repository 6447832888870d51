"""Adapters that act on OpenSM and Slurm: read live state, apply a change, verify, roll back.

`ibpool apply` (`scheduler_hooks.apply`) carries one approved proposal through both adapters; its config,
flow, recovery, exit codes and metrics are in docs/apply.md.
"""
