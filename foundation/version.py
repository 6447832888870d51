"""The installed ibpool version (from the package metadata, so pyproject.toml is its only source)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def ibpool_version() -> str:
    """`ibpool`'s version, or `0+unknown` when run from a tree that was never installed."""
    try:
        return version("ibpool")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = ibpool_version()
