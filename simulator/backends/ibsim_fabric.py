"""A simulated InfiniBand fabric for integration tests: ibsim, optionally OpenSM, and the console.

```python
with IbsimFabric(tmp_path, FatTree(leaves=2, spines=1, hcas_per_leaf=4)) as fabric:
    fabric.start_opensm()                                # LIDs are assigned; perfquery works
    fabric.run_diag(["perfquery", "-x", str(fabric.lid("leaf1")), "1"])
```

Starting and stopping is `simulator.backends.ibsim_run`'s; this adds the FatTree topology and console
helpers. Run diagnostics with `fabric.env` in `fabric.workdir`; ibsim's limits: docs/simulator.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simulator.backends.errors import IbsimError
from simulator.backends.ibsim_run import DEFAULT_OPENSM_OPTIONS, READY, UMAD2SIM, Ibsim, OpenSM
from simulator.backends.processes import poll_until as _poll_until
from simulator.backends.processes import which as _which

__all__ = [
    "DEFAULT_OPENSM_OPTIONS",
    "MAX_CONSOLE_LINE",
    "PROGRAMS",
    "READY",
    "UMAD2SIM",
    "FatTree",
    "IbsimError",
    "IbsimFabric",
    "OpenSM",
    "missing_programs",
    "poll_until",
]

PROGRAMS = ("ibsim", "opensm", "perfquery", "ibnetdiscover", "iblinkinfo")
MAX_CONSOLE_LINE = 127  # ibsim reads console lines into a 128-byte buffer


def missing_programs() -> list[str]:
    """Programs (and the preload library) this module needs that are not installed."""
    missing = [name for name in PROGRAMS if _which(name) is None]
    if not UMAD2SIM.is_file():
        missing.append(str(UMAD2SIM))
    return missing


def poll_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll `predicate` until it holds; raise IbsimError naming `what` after `timeout` seconds."""
    _poll_until(predicate, timeout, what, interval, IbsimError)


# --- topology ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FatTree:
    """A two-level fat tree in ibsim's net-file format.

    Leaf `leafL` port h (1..hcas_per_leaf) goes to `nodeN` port 1; leaf ports after those go up, with
    `links_per_pair` parallel links to every spine: leaf port `hcas_per_leaf + 1 + s * links + k` connects
    to spine `s+1` port `(L-1) * links + k + 1`. `speed` (for example "4xEDR") is written on both ends of
    every link; None leaves ibsim's default (4X SDR).
    """

    leaves: int = 2
    spines: int = 1
    hcas_per_leaf: int = 4
    ports: int = 8
    links_per_pair: int = 1
    speed: str | None = None

    def __post_init__(self) -> None:
        if min(self.leaves, self.spines, self.hcas_per_leaf, self.ports, self.links_per_pair) < 1:
            raise ValueError("every size must be at least 1")
        if self.hcas_per_leaf + self.spines * self.links_per_pair > self.ports:
            raise ValueError("a leaf has too few ports for its HCAs and uplinks")
        if self.leaves * self.links_per_pair > self.ports:
            raise ValueError("a spine has too few ports for its downlinks")

    @property
    def leaf_names(self) -> list[str]:
        """Leaf switch names, leaf1 first."""
        return [f"leaf{i}" for i in range(1, self.leaves + 1)]

    @property
    def spine_names(self) -> list[str]:
        """Spine switch names, spine1 first."""
        return [f"spine{i}" for i in range(1, self.spines + 1)]

    @property
    def switch_names(self) -> list[str]:
        """All switch names."""
        return self.spine_names + self.leaf_names

    @property
    def hca_names(self) -> list[str]:
        """All HCA names, node1 first."""
        return [f"node{i}" for i in range(1, self.leaves * self.hcas_per_leaf + 1)]

    @property
    def switch_ports(self) -> int:
        """How many switch ports the fabric has (linked or not)."""
        return (self.leaves + self.spines) * self.ports

    def hca_of(self, leaf: int, port: int) -> str:
        """Name of the HCA on `leafN` port `port` (both 1-based)."""
        return f"node{(leaf - 1) * self.hcas_per_leaf + port}"

    def _end(self, name: str, port: int) -> str:
        speed = f"  # lid 0 {self.speed}" if self.speed else ""
        return f'"{name}"[{port}]{speed}'

    def render(self) -> str:
        """The net file text."""
        links = self.links_per_pair
        out: list[str] = []
        for s, spine in enumerate(self.spine_names):
            out.append(f'Switch {self.ports} "{spine}"')
            for leaf in range(self.leaves):
                for k in range(links):
                    out.append(f"[{leaf * links + k + 1}] {self._end(f'leaf{leaf + 1}', self._up(s, k))}")
            out.append("")
        for leaf in range(1, self.leaves + 1):
            out.append(f'Switch {self.ports} "leaf{leaf}"')
            for h in range(1, self.hcas_per_leaf + 1):
                out.append(f"[{h}] {self._end(self.hca_of(leaf, h), 1)}")
            for s in range(self.spines):
                for k in range(links):
                    out.append(f"[{self._up(s, k)}] {self._end(f'spine{s + 1}', (leaf - 1) * links + k + 1)}")
            out.append("")
        for leaf in range(1, self.leaves + 1):
            for h in range(1, self.hcas_per_leaf + 1):
                out += [f'Hca 1 "{self.hca_of(leaf, h)}"', f"[1] {self._end(f'leaf{leaf}', h)}", ""]
        return "\n".join(out) + "\n"

    def _up(self, spine_index: int, k: int) -> int:
        return self.hcas_per_leaf + 1 + spine_index * self.links_per_pair + k


# --- the fabric ----------------------------------------------------------------------------------


class IbsimFabric(Ibsim):
    """ibsim running `topology` in `workdir`, with a console FIFO and an optional OpenSM.

    Start-up and stop are `simulator.backends.ibsim_run.Ibsim`'s; this adds the FatTree and console helpers.
    """

    def __init__(
        self,
        workdir: Path,
        topology: FatTree | str,
        *,
        attach: str | None = None,
        sockname: str | None = None,
    ) -> None:
        self.topology = topology if isinstance(topology, FatTree) else None
        net = topology.render() if isinstance(topology, FatTree) else topology
        default_attach = self.topology.hca_names[0] if self.topology else "node1"
        super().__init__(Path(workdir), net, attach=attach or default_attach, sockname=sockname)

    def console(self, command: str, timeout: float = 10.0) -> str:
        """Run one console command and return what ibsim printed for it."""
        if "\n" in command or len(command) > MAX_CONSOLE_LINE:
            raise ValueError(f"a console command is one line of at most {MAX_CONSOLE_LINE} bytes")
        if self.proc is None:
            raise IbsimError("ibsim is not running")
        return self.console_run([command], timeout)

    def performance_set(self, node: str, port: int, attribute: str, field: str, value: int) -> None:
        """Set one PMA counter (`PerformanceSet "node"[port] attribute.field=value`)."""
        output = self.console(f'PerformanceSet "{node}"[{port}] {attribute}.{field}={value}')
        if "has been set to" not in output:
            raise IbsimError(f"PerformanceSet {node}[{port}] {attribute}.{field} failed: {output}")

    def set_vl_xmit_wait(self, node: str, port: int, vl: int, value: int) -> None:
        """Set one per-VL transmit-wait counter (ibsim names it PortVLXmitWaitCountersN)."""
        self.performance_set(node, port, "PortVLXmitWaitCounters", f"PortVLXmitWaitCounters{vl}", value)

    def unlink(self, node: str, port: int | None = None) -> None:
        """Take a link (or every link of `node`) down."""
        self.console(f'Unlink "{node}"' + (f"[{port}]" if port is not None else ""))

    def relink(self, node: str, port: int | None = None) -> None:
        """Restore a link (or every link of `node`) taken down with `unlink`."""
        self.console(f'ReLink "{node}"' + (f"[{port}]" if port is not None else ""))

    def set_error_rate(self, node: str, percent: int, attribute: int | None = None) -> None:
        """Drop `percent` % of the MADs `node` gets (only attribute id `attribute` when given)."""
        self.console(f'Error "{node}" {percent}' + (f" {attribute}" if attribute is not None else ""))

    def __enter__(self) -> IbsimFabric:
        if self.proc is None:
            self.start()
        return self
