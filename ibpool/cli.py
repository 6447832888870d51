"""The `ibpool` command: one entry point, one subcommand per component."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from ibpool import __version__

Main = Callable[[list[str]], int]

_USAGE = """usage: ibpool <command> [options]

commands:
  exporter             node exporter: GPU (NVML) and IB port metrics; --simulate for a fake node
  fabric-exporter      IB fabric: every switch port's counters (perfquery), per-VL waits, topology
  postmortem           a self-contained HTML report of an incident window (demo run or Prometheus + store)
  proposals            submit, list, show, approve, reject and audit change proposals
  recommend            propose pool moves and VL-weight changes from the time series (--once: one cycle)
  simulate             a simulated cluster behind the real exporters, on one port
  scheduler-exporter   Slurm pools: capacity, allocated and pending GPUs, jobs, node states
  apply                apply an approved proposal to OpenSM and Slurm (dry run unless --yes)
  backtest             replay a per-pool minute trace: static vs rebalancing policy vs hindsight oracle
  demo                 the closed loop on a simulated cluster: see, propose, approve, apply, measure
  dashboards           generate or check the Grafana dashboards (dashboards/json)
  version              print the version

Run `ibpool <command> --help` for a command's options.
"""


def _exporter(argv: list[str]) -> int:
    from exporter.main import main

    return main(argv)


def _fabric_exporter(argv: list[str]) -> int:
    from exporter.fabric.main import main

    return main(argv)


def _apply(argv: list[str]) -> int:
    from scheduler_hooks.apply.cli import main

    return main(argv)


def _backtest(argv: list[str]) -> int:
    from recommender.backtest.cli import main

    return main(argv)


def _demo(argv: list[str]) -> int:
    from demo.cli import main

    return main(argv)


def _dashboards(argv: list[str]) -> int:
    from dashboards.cli import main

    return main(argv)


def _postmortem(argv: list[str]) -> int:
    from postmortem.cli import main

    return main(argv)


def _proposals(argv: list[str]) -> int:
    from proposals.cli import main

    return main(argv)


def _recommend(argv: list[str]) -> int:
    from recommender.cli import main

    return main(argv)


def _simulate(argv: list[str]) -> int:
    from simulator.serve.main import main

    return main(argv)


def _scheduler_exporter(argv: list[str]) -> int:
    from exporter.scheduler.main import main

    return main(argv)


def _version(_: list[str]) -> int:
    print(f"ibpool {__version__}")
    return 0


COMMANDS: dict[str, Main] = {
    "apply": _apply,
    "backtest": _backtest,
    "dashboards": _dashboards,
    "demo": _demo,
    "exporter": _exporter,
    "fabric-exporter": _fabric_exporter,
    "postmortem": _postmortem,
    "proposals": _proposals,
    "recommend": _recommend,
    "scheduler-exporter": _scheduler_exporter,
    "simulate": _simulate,
    "version": _version,
}


def configure_logging(level: str) -> None:
    """Log to stderr in logfmt-like lines; only the CLI calls this."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)r",
        stream=sys.stderr,
    )


def main(argv: list[str]) -> int:
    """Dispatch to a subcommand; exit 2 for usage errors."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_USAGE, end="")
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"ibpool: unknown command {argv[0]!r}\n\n{_USAGE}", end="", file=sys.stderr)
        return 2
    return command(argv[1:])


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main(sys.argv[1:]))
