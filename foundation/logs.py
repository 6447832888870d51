"""Logging set-up: only an entry point (a command's `main`) calls it; modules just log."""

from __future__ import annotations

import logging
import sys

LOG_LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str) -> None:
    """Log to stderr in logfmt-like lines at `level` (one of LOG_LEVELS; unknown means info)."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)r",
        stream=sys.stderr,
    )
