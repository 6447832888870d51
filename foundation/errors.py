"""Errors every layer shares. Each package roots its own hierarchy at `IbpoolError`."""

from __future__ import annotations


class IbpoolError(Exception):
    """Root of every error an ibpool component raises on purpose."""


class ConfigError(IbpoolError):
    """Invalid configuration; carries every problem found, each with its file (or `flag`) and key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class CollectorTimeoutError(IbpoolError):
    """A collector did not finish before its deadline (a hung driver call, for instance)."""
