"""The argv of every diagnostic the fabric exporter runs; nothing here resets a counter.

perfquery loops over a switch's ports itself for PortCounters and PortCountersExtended
(`perfquery [-x] -l LID 255`), but queries one port per process for `--vlxmitcounters`; the batch
reader (`pma_helper.py`, the same PMA Get through libibmad) reads all of a switch's ports in one process.
VL arbitration tables (`smpquery vlarb`) are read one port per process, forwarding tables (`ibroute -n`)
one switch per process.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from foundation.commands import which

ALL_PORTS = "255"
HELPER = Path(__file__).with_name("pma_helper.py")
_RESET_FLAGS = frozenset({"-r", "-R", "--reset_after_read", "--Reset_only"})
_VALUE_OPTIONS = frozenset(
    {
        "-C",
        "-P",
        "-t",
        "--Ca",
        "--Port",
        "--timeout",
        "--cache",
        "--load-cache",
        "--ca",
        "--port",
        "--timeout-ms",
    }
)


class ResetFlagError(ValueError):
    """An argv would reset counters; the exporter never does."""


def assert_read_only(argv: Sequence[str]) -> None:
    """Raise ResetFlagError if `argv` carries perfquery's -r/-R (alone or in a cluster like -xr)."""
    skip_value = False
    for arg in argv[1:]:
        if skip_value:
            skip_value = False
            continue
        if arg in _VALUE_OPTIONS:
            skip_value = True
            continue
        cluster = arg.startswith("-") and not arg.startswith("--") and arg[1:].isalpha()
        if arg in _RESET_FLAGS or (cluster and ("r" in arg[1:] or "R" in arg[1:])):
            raise ResetFlagError(f"refusing to run {argv[0]} with {arg}: it resets counters")


@dataclass(frozen=True)
class DiagOptions:
    """Options every diagnostic takes: local CA and port, MAD timeout; where the programs live."""

    ca: str | None = None
    port: int | None = None
    timeout_ms: int | None = None
    bin_dir: Path | None = None

    def args(self) -> list[str]:
        """`-C CA -P PORT -t MS` for the options that are set."""
        out: list[str] = []
        if self.ca:
            out += ["-C", self.ca]
        if self.port is not None:
            out += ["-P", str(self.port)]
        if self.timeout_ms is not None:
            out += ["-t", str(self.timeout_ms)]
        return out


class DiagCommands:
    """Builds argv lists (no shell) for discovery and counter reads."""

    def __init__(self, options: DiagOptions, python: str = sys.executable) -> None:
        self.options = options
        self._python = python
        self._paths: dict[str, str] = {}

    def program(self, name: str) -> str:
        """Full path of a diagnostic: in --ibdiag.bin-dir, else on PATH or in /usr/sbin, /sbin. A missing
        one is not an error here: every sweep then reports it as a command that cannot start."""
        path = self._paths.get(name)
        if path is None:
            bin_dir = self.options.bin_dir
            path = which(name, bin_dir) or (str(bin_dir / name) if bin_dir is not None else name)
            self._paths[name] = path
        return path

    def _diag(self, name: str, *args: str) -> list[str]:
        argv = [self.program(name), *self.options.args(), *args]
        assert_read_only(argv)
        return argv

    def ibnetdiscover(self, cache: Path | None = None) -> list[str]:
        """Discover the fabric (and write libibnetdisc's cache for iblinkinfo when `cache` is set)."""
        return self._diag("ibnetdiscover", *(["--cache", str(cache)] if cache is not None else []))

    def iblinkinfo(self, cache: Path) -> list[str]:
        """Every port's state, one line each, from the cache ibnetdiscover wrote (no second sweep)."""
        return self._diag("iblinkinfo", "--load-cache", str(cache), "-l")

    def switch_counters(self, lid: int, extended: bool) -> list[str]:
        """PortCounters (or PortCountersExtended) of every port of the switch at `lid`, one process."""
        return self._diag("perfquery", *(["-x"] if extended else []), "-l", str(lid), ALL_PORTS)

    def port_counters(self, lid: int, port: int, extended: bool) -> list[str]:
        """PortCounters (or PortCountersExtended) of one port (CAs cannot loop over ports)."""
        return self._diag("perfquery", *(["-x"] if extended else []), str(lid), str(port))

    def port_vl_wait(self, lid: int, port: int) -> list[str]:
        """PortVLXmitWaitCounters of one port through perfquery (one process per port)."""
        return self._diag("perfquery", "--vlxmitcounters", str(lid), str(port))

    def vlarb(self, lid: int, port: int) -> list[str]:
        """Both VL arbitration tables of one port (`smpquery vlarb LID PORT`, a Get: reads only)."""
        return self._diag("smpquery", "vlarb", str(lid), str(port))

    def ibroute(self, lid: int) -> list[str]:
        """The unicast forwarding table of the switch at `lid`, LIDs and ports only (`ibroute -n LID`)."""
        return self._diag("ibroute", "-n", str(lid))

    def vl_wait_batch(self, targets: Sequence[tuple[int, Sequence[int]]]) -> list[str]:
        """PortVLXmitWaitCounters of many (LID, ports) targets in one helper process (perfquery's format)."""
        helper = [self._python, "-S", "-I", str(HELPER)]
        opts = self.options
        if opts.ca:
            helper += ["--ca", opts.ca]
        if opts.port is not None:
            helper += ["--port", str(opts.port)]
        if opts.timeout_ms is not None:
            helper += ["--timeout-ms", str(opts.timeout_ms)]
        argv = [*helper, *(f"{lid}:{port_list(ports)}" for lid, ports in targets)]
        assert_read_only(argv)
        return argv


def port_list(ports: Sequence[int]) -> str:
    """`[1, 2, 3, 7]` -> `1-3,7` (the helper's PORTS syntax)."""
    parts: list[str] = []
    ordered = sorted(set(ports))
    start = previous = ordered[0] if ordered else 0
    for port in [*ordered[1:], -1]:
        if port == previous + 1:
            previous = port
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = port
    return ",".join(parts)
