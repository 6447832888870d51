"""Captured diagnostics output (from ibsim, see data/README) and a scripted command runner."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from exporter.fabric.pma_helper import format_block
from foundation.commands import CommandResult, CommandRunner

DATA = Path(__file__).with_name("data")
LEAF1 = "0x0000000000200001"  # "MF0;leaf-1:MQM8700/U1", LID 3, enhanced port 0
LEAF2 = "0x0000000000200002"  # LID 4
SPINE1 = "0x0000000000200000"  # LID 2
NODE1 = "0x0000000000100000"  # HCA on leaf1 port 1, LID 1
SWITCH_LIDS = {LEAF1: 3, LEAF2: 4, SPINE1: 2}
IBROUTE_FILES = {3: "ibroute_leaf1.txt", 2: "ibroute_spine1.txt", 4: "ibroute_leaf2.txt"}

Handler = Callable[[tuple[str, ...]], CommandResult | None]


def data(name: str) -> str:
    """The text of a captured output file."""
    return (DATA / name).read_text()


def ok(argv: Sequence[str], stdout: str, returncode: int = 0, stderr: str = "") -> CommandResult:
    """A finished command."""
    return CommandResult(tuple(argv), returncode, stdout, stderr, 0.001)


def with_lid(text: str, lid: int) -> str:
    """Captured leaf1 (LID 3) perfquery output relabelled as if it came from `lid`."""
    return re.sub(r"Lid 3 port", f"Lid {lid} port", text)


def helper_output(targets: Sequence[str], values: dict[tuple[int, int, int], int] | None = None) -> str:
    """What pma_helper prints for `LID:PORTS` targets; `values` sets (lid, port, vl) counters."""
    out = []
    for target in targets:
        lid_text, _, ports_text = target.partition(":")
        lid = int(lid_text)
        for part in ports_text.split(","):
            low, _, high = part.partition("-")
            for port in range(int(low), int(high or low) + 1):
                waits = [(values or {}).get((lid, port, vl), 0) for vl in range(16)]
                out.append(format_block(lid, port, port, 0, waits))
    return "".join(out)


def perfquery_lid(argv: tuple[str, ...]) -> int | None:
    """The switch LID of a `perfquery -l LID 255` argv, else None."""
    if Path(argv[0]).name != "perfquery" or "-l" not in argv:
        return None
    return int(argv[argv.index("-l") + 1])


def vl_values(values: dict[tuple[int, int, int], int]) -> Handler:
    """A handler answering the batch helper with `values` set at (lid, port, vl)."""

    def handler(argv: tuple[str, ...]) -> CommandResult | None:
        if not any(arg.endswith("pma_helper.py") for arg in argv):
            return None
        targets = [a for a in argv if a[:1].isdigit() and ":" in a]
        return ok(argv, helper_output(targets, values)) if targets else None

    return handler


class ScriptedRunner(CommandRunner):
    """Answers like the diagnostics did on the captured fabric; `handlers` may override any command."""

    def __init__(self, handlers: Sequence[Handler] = ()) -> None:
        super().__init__(5.0)
        self.handlers = list(handlers)
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str]) -> CommandResult:
        args = tuple(argv)
        self.calls.append(args)
        for handler in self.handlers:
            result = handler(args)
            if result is not None:
                return result
        return default_answer(args)


def default_answer(argv: tuple[str, ...]) -> CommandResult:
    """The captured answer for `argv`."""
    name = Path(argv[0]).name
    if name == "ibnetdiscover":
        if "--cache" in argv:
            Path(argv[argv.index("--cache") + 1]).write_text("cache")
        return ok(argv, data("ibnetdiscover.txt"))
    if name == "iblinkinfo":
        return ok(argv, data("iblinkinfo.txt"))
    if name == "perfquery":
        return ok(argv, _perfquery(argv))
    if name == "smpquery" and "vlarb" in argv:
        lid, port = argv[-2:]
        return ok(argv, data("smpquery_vlarb_switch.txt").replace("Lid 3 port 1", f"Lid {lid} port {port}"))
    if name == "ibroute":
        return ok(argv, data(IBROUTE_FILES[int(argv[-1])]))
    if argv[-1].split(":")[0].isdigit():  # the batch helper: python -S -I pma_helper.py LID:PORTS ...
        return ok(argv, helper_output([a for a in argv if re.fullmatch(r"\d+:[\d,-]+", a)]))
    raise AssertionError(f"unexpected command {argv}")


def _perfquery(argv: tuple[str, ...]) -> str:
    extended = "-x" in argv
    if "--vlxmitcounters" in argv:
        lid, port = int(argv[-2]), int(argv[-1])
        return helper_output([f"{lid}:{port}"])
    if "-l" in argv:
        lid = int(argv[argv.index("-l") + 1])
        return with_lid(
            data("perfquery_switch_extended.txt" if extended else "perfquery_switch_basic.txt"), lid
        )
    lid, port = int(argv[-2]), int(argv[-1])
    text = data("perfquery_ca_basic.txt")
    if extended:
        blocks = data("perfquery_switch_extended.txt").split("# Port extended counters:")
        text = "# Port extended counters:" + blocks[2]  # port 1 of the switch capture
        text = text.replace("Lid 3 port 1", f"Lid {lid} port {port}")
    return text.replace("Lid 1 port 1", f"Lid {lid} port {port}")
