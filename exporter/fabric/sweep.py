"""One sweep of the fabric: discover, read port states, read every port's counters with bounded concurrency.

Which diagnostic reads what: docs/fabric-exporter.md. Rules: a node is up when every expected attribute of
every one of its ports was read; a vanished switch is reported down for `forget_after_seconds`; a failed
VL arbitration read is reported per port and fails nothing else; forwarding tables are read less often
(`routes_read.RouteKeeper`: a failed read keeps the last good table); when discovery fails, the last good
topology is used again. Nothing old passes for fresh: the result says when its topology was discovered
(`topology_at`), each port reading when it was read (`read_at`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from exporter.fabric.commands import DiagCommands
from exporter.fabric.errors import DiscoveryError
from exporter.fabric.linkinfo import parse_iblinkinfo
from exporter.fabric.model import (
    Attribute,
    FabricNode,
    NodeReading,
    PortKey,
    PortReading,
    PortState,
    SweepResult,
    Topology,
)
from exporter.fabric.perfquery import CounterBlock, parse_perfquery
from exporter.fabric.routes_read import RouteKeeper
from exporter.fabric.topology import parse_ibnetdiscover
from exporter.fabric.vlarb_read import VlarbMode, vlarb_reading, vlarb_targets
from foundation.commands import CommandResult, CommandRunner

log = logging.getLogger(__name__)

# keys of skipped_lines
PARSED_PROGRAMS = ("ibnetdiscover", "iblinkinfo", "perfquery", "pma_helper", "ibroute")
VlMode = Literal["batch", "perfquery", "off"]
VL_MODES: tuple[VlMode, ...] = ("batch", "perfquery", "off")


@dataclass(frozen=True)
class SweepSettings:
    """What a sweep reads and how many diagnostics may run at once."""

    concurrency: int = 4
    hca_ports: bool = False
    vl_counters: VlMode = "batch"
    port_states: bool = True
    forget_after_seconds: float = 3600.0
    vlarb_ports: VlarbMode = "first"
    routes_interval_seconds: float = 300.0  # forwarding tables (ibroute); 0: never read


@dataclass(frozen=True)
class _Job:
    """One command and the nodes whose ports it reads."""

    guids: tuple[str, ...]
    program: str
    argv: tuple[str, ...]


@dataclass
class _Plan:
    """Everything one sweep will run, and what it expects back."""

    jobs: list[_Job] = field(default_factory=list)
    expected_ports: dict[str, list[int]] = field(default_factory=dict)
    lid_owner: dict[int, str] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)
    vl_targets: list[tuple[str, int, list[int]]] = field(default_factory=list)


class Sweeper:
    """Runs sweeps; keeps the last good topology and the switches seen in earlier sweeps."""

    def __init__(
        self,
        commands: DiagCommands,
        runner: CommandRunner,
        settings: SweepSettings,
        workdir: Path,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._commands = commands
        self._runner = runner
        self.settings = settings
        self._workdir = workdir
        self._clock = clock
        self._pool = ThreadPoolExecutor(max(1, settings.concurrency), thread_name_prefix="fabric-diag")
        self._topology: Topology | None = None
        self._topology_at = 0.0
        self._seen: dict[str, tuple[FabricNode, float]] = {}
        self._routes = RouteKeeper(settings.routes_interval_seconds)
        self._numbers = itertools.count(1)

    def close(self) -> None:
        """Stop the worker threads (commands already running finish or time out)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def sweep(self) -> SweepResult:
        """Run one complete sweep; raise DiscoveryError only when no topology is known at all."""
        started = time.perf_counter()
        skipped: Counter[str] = Counter()
        problems: list[str] = []
        topology, cache, discovered = self._discover(skipped, problems)
        states = self._states(topology, cache, skipped, problems)
        tables = [
            (key, self._pool.submit(self._runner.run, self._commands.vlarb(lid, key[1])))
            for key, lid in vlarb_targets(topology, states, self.settings.vlarb_ports)
        ]
        routes = [
            (switch, self._pool.submit(self._run_timed, tuple(self._commands.ibroute(switch.lid or 0))))
            for switch in self._routes.due(topology, self._clock())
        ]
        readings = self._read(topology, skipped)
        vlarb = {key: vlarb_reading(future.result()) for key, future in tables}
        for switch, done in routes:
            bad = self._routes.update(switch, *done.result())
            if bad:
                skipped["ibroute"] += bad
        vanished = self._vanished(topology)
        duration = time.perf_counter() - started
        return SweepResult(
            topology=topology,
            states=states,
            readings=readings,
            vanished=vanished,
            finished_at=self._clock(),
            duration_seconds=duration,
            skipped_lines=dict(skipped),
            problems=tuple(problems),
            vlarb=vlarb,
            topology_at=None if discovered else self._topology_at,
            routes=self._routes.tables,
            route_errors=self._routes.errors,
        )

    # --- discovery -------------------------------------------------------------------------------

    def _discover(self, skipped: Counter[str], problems: list[str]) -> tuple[Topology, Path | None, bool]:
        """The topology (found now, or the last good one), the cache file for iblinkinfo, and whether the
        topology was discovered in this sweep."""
        cache = self._workdir / f"fabric-{next(self._numbers)}.cache" if self.settings.port_states else None
        if cache is not None:
            cache.unlink(missing_ok=True)
        result = self._runner.run(self._commands.ibnetdiscover(cache))
        topology, bad = parse_ibnetdiscover(result.stdout)
        if bad:
            skipped["ibnetdiscover"] += bad
        if not result.ok:
            problems.append(f"discovery: {result.describe()}")
        if topology.nodes:
            self._topology, self._topology_at = topology, self._clock()
            return topology, cache, True
        if cache is not None:
            cache.unlink(missing_ok=True)
        if self._topology is None:
            raise DiscoveryError(f"discovery found no nodes ({result.describe()})")
        age = self._clock() - self._topology_at
        problems.append(f"discovery found no nodes; using the topology of an earlier sweep ({age:.0f} s old)")
        return self._topology, None, False

    def _states(
        self, topology: Topology, cache: Path | None, skipped: Counter[str], problems: list[str]
    ) -> dict[PortKey, PortState]:
        if cache is None:
            return {}
        if not cache.exists():
            problems.append("port states: ibnetdiscover wrote no cache file")
            return {}
        try:
            result = self._runner.run(self._commands.iblinkinfo(cache))
        finally:
            cache.unlink(missing_ok=True)
        states, bad = parse_iblinkinfo(result.stdout, topology)
        if bad:
            skipped["iblinkinfo"] += bad
        if not result.ok:
            problems.append(f"port states: {result.describe()}")
        return states

    def _vanished(self, topology: Topology) -> dict[str, FabricNode]:
        now = self._clock()
        for switch in topology.switches:
            self._seen[switch.guid] = (switch, now)
        vanished: dict[str, FabricNode] = {}
        for guid, (node, seen) in list(self._seen.items()):
            if guid in topology.nodes:
                continue
            if now - seen > self.settings.forget_after_seconds:
                del self._seen[guid]
            else:
                vanished[guid] = node
        return vanished

    # --- counters --------------------------------------------------------------------------------

    def _plan(self, topology: Topology) -> _Plan:
        plan = _Plan()
        nodes = topology.switches + (topology.cas if self.settings.hca_ports else [])
        for node in nodes:
            if node.kind == "switch":
                self._plan_switch(plan, node)
            else:
                self._plan_ca(plan, node)
        self._plan_vl_batches(plan)
        return plan

    def _add(self, plan: _Plan, guids: Iterable[str], program: str, argv: list[str]) -> None:
        plan.jobs.append(_Job(tuple(guids), program, tuple(argv)))

    def _plan_switch(self, plan: _Plan, node: FabricNode) -> None:
        ports = list(range(1, node.ports + 1))
        plan.expected_ports[node.guid] = ports
        if node.lid is None or node.lid == 0:
            plan.unreachable[node.guid] = "no LID assigned (is a subnet manager running?)"
            return
        plan.lid_owner[node.lid] = node.guid
        commands = self._commands
        for extended in (False, True):
            self._add(plan, [node.guid], "perfquery", commands.switch_counters(node.lid, extended))
        self._plan_vl(plan, node, node.lid, ports)

    def _plan_ca(self, plan: _Plan, node: FabricNode) -> None:
        ports = [p for p in range(1, node.ports + 1) if node.lid_of(p)]
        plan.expected_ports[node.guid] = ports
        if not ports:
            plan.unreachable[node.guid] = "no port has a LID"
            return
        commands = self._commands
        for port in ports:
            lid = node.port_lids[port]
            plan.lid_owner[lid] = node.guid
            for extended in (False, True):
                self._add(plan, [node.guid], "perfquery", commands.port_counters(lid, port, extended))
            self._plan_vl(plan, node, lid, [port])

    def _plan_vl(self, plan: _Plan, node: FabricNode, lid: int, ports: list[int]) -> None:
        mode = self.settings.vl_counters
        if mode == "perfquery":
            for port in ports:
                self._add(plan, [node.guid], "perfquery", self._commands.port_vl_wait(lid, port))
        elif mode == "batch":
            plan.vl_targets.append((node.guid, lid, ports))

    def _plan_vl_batches(self, plan: _Plan) -> None:
        """Split the batch reader's targets into `concurrency` helper processes of similar size."""
        if not plan.vl_targets:
            return
        count = max(1, min(self.settings.concurrency, len(plan.vl_targets)))
        chunks: list[list[tuple[str, int, list[int]]]] = [[] for _ in range(count)]
        for index, target in enumerate(plan.vl_targets):
            chunks[index % count].append(target)
        for chunk in chunks:
            argv = self._commands.vl_wait_batch([(lid, ports) for _, lid, ports in chunk])
            self._add(plan, dict.fromkeys(guid for guid, _, _ in chunk), "pma_helper", argv)

    def _expected(self) -> frozenset[Attribute]:
        base: set[Attribute] = {"basic", "extended"}
        if self.settings.vl_counters != "off":
            base.add("vl")
        return frozenset(base)

    def _read(self, topology: Topology, skipped: Counter[str]) -> dict[str, NodeReading]:
        plan = self._plan(topology)
        results = self._pool.map(self._run_timed, [job.argv for job in plan.jobs])
        gathered = _Gathered(plan, skipped)
        for job, (result, finished_at) in zip(plan.jobs, results, strict=True):
            gathered.add(job, result, finished_at)
        return gathered.readings(self._expected())

    def _run_timed(self, argv: tuple[str, ...]) -> tuple[CommandResult, float]:
        """Run one command; its result and when it ended (the clock of `finished_at`)."""
        result = self._runner.run(argv)
        return result, self._clock()


class _Gathered:
    """Port readings and errors per node, filled from the commands' outputs."""

    def __init__(self, plan: _Plan, skipped: Counter[str]) -> None:
        self._plan = plan
        self._skipped = skipped
        self._ports: dict[str, dict[int, PortReading]] = {guid: {} for guid in plan.expected_ports}
        self._errors: dict[str, list[str]] = {guid: [] for guid in plan.expected_ports}
        for guid, reason in plan.unreachable.items():
            self._errors[guid].append(reason)

    def add(self, job: _Job, result: CommandResult, finished_at: float) -> None:
        """Attribute every block of `result` (read by `finished_at`) to its node and port (by LID); note a
        failed command."""
        blocks, bad = parse_perfquery(result.stdout)
        if bad:
            self._skipped[job.program] += bad
        if not result.ok:
            for guid in job.guids:
                self._errors[guid].append(result.describe())
        plan = self._plan
        for block in blocks:
            owner = plan.lid_owner.get(block.lid)
            if owner is None or owner not in job.guids or block.port not in plan.expected_ports[owner]:
                continue
            _apply(self._ports[owner].setdefault(block.port, PortReading()), block, finished_at)

    def readings(self, expected: frozenset[Attribute]) -> dict[str, NodeReading]:
        """One NodeReading per planned node: up when every expected attribute of every port arrived."""
        readings: dict[str, NodeReading] = {}
        for guid, wanted in self._plan.expected_ports.items():
            got = self._ports[guid]
            complete = all(p in got and expected <= got[p].attributes for p in wanted)
            up = bool(wanted) and guid not in self._plan.unreachable and complete
            readings[guid] = NodeReading(guid, up, expected, got, tuple(self._errors[guid]))
        return readings


def _apply(reading: PortReading, block: CounterBlock, read_at: float) -> None:
    """Merge one attribute into a port's reading; 64-bit extended values win over 32-bit basic ones. The
    reading is as old as its oldest attribute."""
    reading.read_at = read_at if reading.read_at is None else min(reading.read_at, read_at)
    if block.attribute == "vl":
        reading.vl_wait.update(block.vl_wait)
    elif block.attribute == "extended":
        reading.counters.update(block.counters)
        reading.wide.update(block.counters)
    else:
        for name, value in block.counters.items():
            if name not in reading.wide:
                reading.counters[name] = value
    reading.attributes.add(block.attribute)
