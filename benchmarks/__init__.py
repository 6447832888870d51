"""Benchmarks: scripts that print their figures (never run as tests)."""
