"""Errors of the backtest."""

from __future__ import annotations


class BacktestError(Exception):
    """Root of the backtest's errors."""


class TraceError(BacktestError):
    """The trace file is missing, unreadable or malformed."""
