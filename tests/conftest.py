"""Plugins every test run loads: in CI, skips fail (tests/ci_skips.py)."""

pytest_plugins = ["tests.ci_skips"]
