"""What every long-running ibpool command's `main` does: load the config (exit 2 listing every problem),
set up logging and signals, serve until SIGTERM or SIGINT (exit 1 when it cannot start)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

from foundation.errors import ConfigError, IbpoolError
from foundation.logs import configure_logging
from foundation.settings import WebSettings
from foundation.web_config import WebConfig, load_web_config

log = logging.getLogger(__name__)

C = TypeVar("C", bound=WebSettings)


def web_config_of(cfg: WebSettings) -> WebConfig:
    """The TLS/basic-auth settings named by `cfg` (plain HTTP without a file)."""
    return load_web_config(cfg.web_config_file) if cfg.web_config_file else WebConfig()


def config_failed(prog: str, problems: list[str]) -> int:
    """Print every configuration problem under one heading; the exit status 2."""
    print(f"{prog}: invalid configuration:", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
    return 2


def until_signal(serve: Callable[[threading.Event], int]) -> int:
    """`serve(stop)`, where SIGTERM or SIGINT sets `stop`."""
    stop = threading.Event()

    def on_signal(signum: int, _: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return serve(stop)


def run_service(
    prog: str,
    argv: list[str],
    load: Callable[[list[str]], C],
    serve: Callable[[C, threading.Event], int],
) -> int:
    """Load `argv` with `load`, then `serve(cfg, stop)` until a signal sets `stop`."""
    try:
        cfg = load(argv)
        web_config_of(cfg)
    except ConfigError as exc:
        return config_failed(prog, exc.problems)
    configure_logging(cfg.log_level)
    try:
        return until_signal(lambda stop: serve(cfg, stop))
    except IbpoolError as exc:
        log.error("%s", exc)
        return 1
