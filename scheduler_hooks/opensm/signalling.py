"""Telling OpenSM to re-read its files: SIGHUP to the pid from the pid file, after checking it is OpenSM."""

from __future__ import annotations

import logging
import os
import re
import signal
from pathlib import Path

from scheduler_hooks.errors import SignalFailedError
from scheduler_hooks.opensm import conffile
from scheduler_hooks.opensm.config import OpenSMConfig

log = logging.getLogger(__name__)
_PROC = Path("/proc")


def opensm_pid(config: OpenSMConfig) -> int:
    """The pid to signal: from the pid file, else the configured pid; checked to be a live OpenSM."""
    pid = config.pid
    if config.pid_file is not None:
        try:
            text = config.pid_file.read_text().strip()
        except OSError as exc:
            raise SignalFailedError(f"cannot read the OpenSM pid file {config.pid_file}: {exc}") from exc
        if not text.isdigit() or int(text) < 1:
            raise SignalFailedError(f"pid file {config.pid_file} does not hold a pid: {text[:40]!r}")
        pid = int(text)
    if pid is None:
        raise SignalFailedError("no OpenSM pid configured")
    try:
        os.kill(pid, 0)
    except ProcessLookupError as exc:
        raise SignalFailedError(f"OpenSM (pid {pid}) is not running") from exc
    except PermissionError as exc:
        raise SignalFailedError(f"not allowed to signal pid {pid}") from exc
    if config.process_name is not None:
        try:
            name = (_PROC / str(pid) / "comm").read_text().strip()
        except OSError as exc:
            raise SignalFailedError(f"cannot read the name of pid {pid}: {exc}") from exc
        if name != config.process_name:
            raise SignalFailedError(f"pid {pid} is {name!r}, not {config.process_name!r}")
    return pid


def reread(config: OpenSMConfig) -> int:
    """SIGHUP OpenSM (it re-reads opensm.conf, the QoS policy and partitions, then sweeps); the pid."""
    pid = opensm_pid(config)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        raise SignalFailedError(f"SIGHUP to pid {pid} failed: {exc}") from exc
    log.info("sent SIGHUP to OpenSM pid %d", pid)
    return pid


# OpenSM logs these (at error level, always) when a file it re-read is wrong; it then falls back to
# defaults (no partitions but Default, or no QoS policy), so verification stops at the first one.
_CONFIG_ERRORS = re.compile(r"PARSE ERROR|ERR AC[0-9A-F]{2}|Partition configuration in error")
DEFAULT_LOG = Path("/var/log/opensm.log")


def log_path(config: OpenSMConfig) -> Path:
    """OpenSM's log: `log_file` from the adapter config, else from opensm.conf, else the default."""
    if config.log_file is not None:
        return config.log_file
    try:
        options = conffile.parse_options(config.config_file.read_text())
    except OSError:
        return DEFAULT_LOG
    value = options.get("log_file")
    return Path(value) if conffile.is_set(value) and value else DEFAULT_LOG


def log_size(path: Path) -> int:
    """The log's size now (0 when it cannot be read)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_errors(path: Path, offset: int) -> str | None:
    """The first configuration error OpenSM logged after `offset` (None: none, or log unreadable)."""
    try:
        with path.open("rb") as log:
            if log.seek(0, 2) < offset:
                return None  # rotated or truncated
            log.seek(offset)
            text = log.read(4 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if _CONFIG_ERRORS.search(line):
            return line.strip()[-300:]
    return None
