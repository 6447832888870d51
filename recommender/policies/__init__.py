"""Policies: pure functions from signals to proposed changes (no I/O)."""
