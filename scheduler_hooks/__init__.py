"""Adapters that act on OpenSM and Slurm: read live state, apply a change, verify, roll back."""
