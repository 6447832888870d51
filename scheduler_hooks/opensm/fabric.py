"""The fabric as the adapter sees it: ports from ibnetdiscover, node names, and live reads per port."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from scheduler_hooks.errors import HookError
from scheduler_hooks.opensm import parse
from scheduler_hooks.opensm.commands import Diag
from scheduler_hooks.opensm.config import VerifyConfig

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, order=True)
class PortRef:
    """A port to query: LID and port number, with a label for messages."""

    lid: int
    port: int
    label: str = ""

    def __str__(self) -> str:
        return f"{self.label or 'lid ' + str(self.lid)}[{self.port}] (lid {self.lid})"


@dataclass(frozen=True)
class Topology:
    """Linked switch ports and CA ports, and node name -> port GUIDs."""

    switch_ports: tuple[PortRef, ...]
    ca_ports: tuple[PortRef, ...]
    guid_port: Mapping[str, PortRef]
    names: Mapping[str, tuple[str, ...]]
    port_names: Mapping[str, str]

    def ports_of(self, guids: Iterable[str]) -> list[PortRef]:
        """The CA ports with these port GUIDs (unknown GUIDs left out)."""
        return [self.guid_port[g] for g in guids if g in self.guid_port]


def build_topology(
    ports: Sequence[parse.PortInfo], pattern: str, static: Mapping[str, tuple[str, ...]]
) -> Topology:
    """Topology from `ibnetdiscover -p`; node name = group 1 of `pattern` on the node description."""
    regex = re.compile(pattern)
    switch: set[PortRef] = set()
    cas: set[PortRef] = set()
    guid_port: dict[str, PortRef] = {}
    names: dict[str, set[str]] = {}
    port_names: dict[str, str] = {}
    for info in ports:
        if info.kind == "SW":
            if info.linked and info.port > 0:
                switch.add(PortRef(info.lid, info.port, info.description))
            continue
        if info.kind != "CA" or info.lid == 0:
            continue
        ref = PortRef(info.lid, info.port, info.description)
        cas.add(ref)
        guid_port[info.guid] = ref
        port_names[f"{info.description}/P{info.port}"] = info.guid
        match = regex.search(info.description)
        if match and match.group(1):
            names.setdefault(match.group(1), set()).add(info.guid)
    merged = {name: tuple(sorted(guids)) for name, guids in names.items()}
    merged.update(static)
    return Topology(tuple(sorted(switch)), tuple(sorted(cas)), guid_port, merged, port_names)


def sample(ports: Sequence[PortRef], config: VerifyConfig) -> list[PortRef]:
    """All ports, or `sample_size` spread evenly over them."""
    if config.ports == "all" or len(ports) <= config.sample_size:
        return list(ports)
    step = len(ports) / config.sample_size
    return [ports[int(i * step)] for i in range(config.sample_size)]


class FabricReader:
    """Live reads through the diagnostics, several at once."""

    def __init__(self, diag: Diag, concurrency: int = 4) -> None:
        self.diag = diag
        self.concurrency = max(1, concurrency)

    def topology(self, pattern: str, static: Mapping[str, tuple[str, ...]]) -> Topology:
        """Discover the fabric (one ibnetdiscover)."""
        return build_topology(parse.parse_ports_report(self.diag.ports_report()), pattern, static)

    def vlarb(self, ref: PortRef) -> parse.VlarbTables:
        """Both arbitration tables of a port."""
        return parse.parse_vlarb(self.diag.smpquery("vlarb", ref.lid, ref.port))

    def sl2vl(self, ref: PortRef) -> list[tuple[int, int, tuple[int, ...]]]:
        """The SL-to-VL rows of a port (every input port of a switch port)."""
        return parse.parse_sl2vl(self.diag.smpquery("sl2vl", ref.lid, ref.port))

    def pkeys(self, ref: PortRef) -> list[int]:
        """The non-zero P_Keys of a port."""
        return parse.parse_pkeys(self.diag.smpquery("pkeys", ref.lid, ref.port))

    def path_sl(self, source: PortRef, destination: PortRef) -> int | None:
        """The SL of the first path record from `source` to `destination` (None: no path)."""
        records = parse.parse_path_records(self.diag.path_records(source.lid, destination.lid))
        return records[0].sl if records else None

    def each(self, items: Sequence[T], read: Callable[[T], R]) -> list[R | Exception]:
        """`read` on every item, `concurrency` at a time; an item's exception is returned in its place."""

        def guarded(item: T) -> R | Exception:
            try:
                return read(item)
            except (HookError, OSError, ValueError) as exc:
                return exc

        if len(items) <= 1 or self.concurrency == 1:
            return [guarded(item) for item in items]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(guarded, items))


def membership(pkeys: Iterable[int], pkey: int) -> str:
    """full, limited or none: how a port holding `pkeys` belongs to partition `pkey`."""
    found = [k for k in pkeys if k & 0x7FFF == pkey & 0x7FFF]
    if any(k & 0x8000 for k in found):
        return "full"
    return "limited" if found else "none"
