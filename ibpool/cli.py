"""The `ibpool` command: one entry point, one subcommand per component (the top layer).

Each subcommand's module is imported only when that subcommand runs, so `ibpool --help` and a plain
exporter start load nothing they do not use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from foundation.version import __version__

Main = Callable[[list[str]], int]


@dataclass(frozen=True)
class Command:
    """A subcommand: the module whose `main(argv) -> int` runs it, and one line of help."""

    module: str
    help: str

    def main(self) -> Main:
        """The subcommand's entry point (imports its module)."""
        entry: Main = importlib.import_module(self.module).main
        return entry


COMMANDS: dict[str, Command] = {
    "exporter": Command(
        "exporter.main", "node exporter: GPU (NVML) and IB port metrics; --simulate for a fake node"
    ),
    "fabric-exporter": Command(
        "exporter.fabric.main", "IB fabric: every switch port's counters (perfquery), per-VL waits, topology"
    ),
    "scheduler-exporter": Command(
        "exporter.scheduler.main", "Slurm pools: capacity, allocated and pending GPUs, jobs, node states"
    ),
    "targets": Command(
        "exporter.scheduler.targets_main",
        "Prometheus file_sd targets (node, pool, cluster labels), from Slurm",
    ),
    "recommend": Command(
        "recommender.cli", "propose pool moves and VL-weight changes from the time series (--once: one cycle)"
    ),
    "proposals": Command("proposals.cli", "submit, list, show, approve, reject and audit change proposals"),
    "approval-server": Command(
        "proposals.approval_server", "approve or reject proposals over HTTP(S) as the authenticated user"
    ),
    "apply": Command(
        "scheduler_hooks.apply.cli", "apply an approved proposal to OpenSM and Slurm (dry run unless --yes)"
    ),
    "postmortem": Command(
        "postmortem.cli",
        "a self-contained HTML report of an incident window (demo run or Prometheus + store)",
    ),
    "backtest": Command(
        "recommender.backtest.cli", "replay a per-pool minute trace: static vs rebalancing policy vs ceilings"
    ),
    "dashboards": Command("dashboards.cli", "generate or check the Grafana dashboards (dashboards/json)"),
    "simulate": Command("simulator.serve.main", "a simulated cluster behind the real exporters, on one port"),
    "demo": Command(
        "demo.cli", "the closed loop on a simulated cluster: see, propose, approve, apply, measure"
    ),
}
SIMULATED_EXPORTER = Command("simulator.node_exporter", "the node exporter over a simulated node")

# Bash completion: subcommands from this table, a subcommand's flags from its own --help (read on demand).
BASH_COMPLETION = """# ibpool bash completion: eval "$(ibpool completion bash)"
_ibpool() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "%s --help --version" -- "$cur"))
    elif [[ $cur == -* ]]; then
        local flags
        flags=$(ibpool "${COMP_WORDS[1]}" --help 2>/dev/null | grep -oE -- '--[A-Za-z0-9][A-Za-z0-9.-]*')
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _ibpool ibpool
"""


def usage() -> str:
    """The top-level help."""
    width = max(map(len, COMMANDS)) + 2
    lines = [f"  {name:<{width}} {command.help}" for name, command in COMMANDS.items()]
    return (
        "usage: ibpool <command> [options]\n       ibpool --version\n"
        '       eval "$(ibpool completion bash)"   # shell completion\n\ncommands:\n'
        + "\n".join(lines)
        + "\n\nRun `ibpool <command> --help` for a command's options.\n"
    )


def resolve(name: str, argv: list[str]) -> Command | None:
    """The command `name` runs with `argv` (the simulated node exporter when `--simulate` is given)."""
    if name == "exporter" and any(arg == "--simulate" or arg.startswith("--simulate.") for arg in argv):
        return SIMULATED_EXPORTER
    return COMMANDS.get(name)


def main(argv: list[str]) -> int:
    """Dispatch to a subcommand; exit 2 for usage errors."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), end="")
        return 0 if argv else 2
    if argv[0] in ("--version", "version"):
        print(f"ibpool {__version__}")
        return 0
    if argv[0] == "completion":
        if argv[1:] != ["bash"]:
            print("usage: ibpool completion bash", file=sys.stderr)
            return 2
        print(BASH_COMPLETION % " ".join([*COMMANDS, "completion"]), end="")
        return 0
    command = resolve(argv[0], argv[1:])
    if command is None:
        print(f"ibpool: unknown command {argv[0]!r}\n\n{usage()}", end="", file=sys.stderr)
        return 2
    return command.main()(argv[1:])


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main(sys.argv[1:]))
