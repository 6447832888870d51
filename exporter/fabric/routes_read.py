"""When a sweep reads the switches' forwarding tables (`ibroute`), and what it keeps between reads.

Tables change only when OpenSM reroutes, so they are read every `interval_seconds` (0: never), and at once
when the LIDs discovery found change (OpenSM programs new tables then) or a switch has no table yet (new,
or its reads have failed so far). A read that fails keeps the switch's last good table and its error is
reported (`RouteKeeper.errors`) until a read succeeds; a switch gone from discovery loses its table.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.fabric.ibroute import parse_ibroute
from exporter.fabric.model import FabricNode, RouteTable, Topology
from foundation.commands import CommandResult


def lid_plan(topology: Topology) -> frozenset[tuple[str, int, int, int]]:
    """Every (GUID, port, LID, LMC) discovery found: when it changes, the forwarding tables have too."""
    out: set[tuple[str, int, int, int]] = set()
    for node in topology.nodes.values():
        if node.kind == "switch":
            out.add((node.guid, 0, node.lid or 0, 0))
        else:
            out.update((node.guid, p, lid, node.port_lmcs.get(p, 0)) for p, lid in node.port_lids.items())
    return frozenset(out)


class RouteKeeper:
    """The last good forwarding table of every switch, and when to read them again."""

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self._tables: dict[str, RouteTable] = {}
        self._errors: dict[str, str] = {}
        self._read_at: float | None = None
        self._plan: frozenset[tuple[str, int, int, int]] = frozenset()

    def due(self, topology: Topology, now: float) -> list[FabricNode]:
        """The switches (with a LID) whose tables to read in this sweep."""
        if self.interval_seconds <= 0:
            return []
        for guid in [g for g in self._tables if g not in topology.nodes]:
            del self._tables[guid]
        for guid in [g for g in self._errors if g not in topology.nodes]:
            del self._errors[guid]
        switches = [s for s in topology.switches if s.lid]
        plan = lid_plan(topology)
        if self._read_at is None or now - self._read_at >= self.interval_seconds or plan != self._plan:
            self._read_at, self._plan = now, plan
            return switches
        return [s for s in switches if s.guid not in self._tables]

    def update(self, switch: FabricNode, result: CommandResult, now: float) -> int:
        """Take one read's table (or keep the last good one and note why not); the lines it skipped."""
        parsed = parse_ibroute(result.stdout, switch.guid, switch.lid or 0, switch.ports)
        error = None if result.ok else result.describe()
        error = error or (f"ibroute: {parsed.error}" if parsed.error else None)
        if error is None:
            self._tables[switch.guid] = RouteTable(switch.lid or 0, parsed.ports, now)
            self._errors.pop(switch.guid, None)
        else:
            self._errors[switch.guid] = error
        return parsed.skipped

    @property
    def tables(self) -> Mapping[str, RouteTable]:
        """The last good table of every switch that has one."""
        return dict(self._tables)

    @property
    def errors(self) -> Mapping[str, str]:
        """Why the last read of a switch failed, for every switch whose last read failed."""
        return dict(self._errors)
