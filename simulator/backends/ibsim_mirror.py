"""Mirror the model into a running ibsim, and the fabric's programmed QoS back into the model.

`push()` writes the link-state changes and every switch-port counter that changed since the last push in
one console batch; `pull_qos(source)` applies the tables OpenSM programmed with `model.set_vl_weights`, so
a QoS change made on the real OpenSM changes what the model does next. The mirror must be the only writer
(ibsim's counters all 0 when it is made); data and packet counters of cabled ports read back with ibsim's
own traffic added (docs/simulator.md). `plan()` reads the model: call it under the runner's lock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from simulator.backends.errors import ConsoleError
from simulator.backends.ibsim_console import Console
from simulator.backends.ibsim_counters import FieldValue, port_fields
from simulator.backends.qos_read import QosChange, QosSource, apply_qos
from simulator.cluster.model import ClusterModel

log = logging.getLogger(__name__)
FieldKey = tuple[str, int, str, str]


@dataclass(frozen=True)
class Plan:
    """The console commands of one push and the state ibsim holds once they ran."""

    links: dict[int, bool] = field(default_factory=dict)  # link index -> up
    fields: tuple[FieldValue, ...] = ()
    commands: tuple[str, ...] = ()


class IbsimMirror:
    """Keeps a running ibsim's switch-port counters and link states equal to the model's."""

    def __init__(
        self, model: ClusterModel, console: Console, *, hca_ports: bool = False, fresh: bool = True
    ) -> None:
        self.model = model
        self.console = console
        self.hca_ports = hca_ports
        self._fresh = fresh
        self._sent: dict[FieldKey, int] = {}
        self._link_up = [True] * len(model.topology.links)  # ibsim starts with every cable up

    def plan(self) -> Plan:
        """What ibsim needs to hold the model's state now (reads the model, writes nothing)."""
        links = {i: up for i, up in enumerate(self.model.fabric.link_up) if up != self._link_up[i]}
        commands = [self._link_command(i, up) for i, up in links.items()]
        changed: list[FieldValue] = []
        for view in self.model.fabric_view(include_hcas=self.hca_ports).ports:
            for item in port_fields(view):
                held = self._sent.get(item.key, 0 if self._fresh else None)
                if held != item.value:
                    changed.append(item)
        commands += [item.command() for item in changed]
        return Plan(links, tuple(changed), tuple(commands))

    def send(self, plan: Plan) -> int:
        """Run a plan's commands in one batch; ConsoleError when ibsim refuses any. Returns their count."""
        if not plan.commands:
            return 0
        lines = [line.replace("sim> ", "").strip() for line in self.console.run(plan.commands).splitlines()]
        problems = [line for line in lines if line.startswith("#")]
        set_count = sum("has been set to" in line for line in lines)
        if problems or set_count != len(plan.fields):
            detail = "; ".join(problems[:5]) or f"{set_count} of {len(plan.fields)} counters set"
            raise ConsoleError(f"ibsim refused part of a push: {detail}")
        for index, up in plan.links.items():
            self._link_up[index] = up
        for item in plan.fields:
            self._sent[item.key] = item.value
        log.debug("pushed %d link changes and %d counters", len(plan.links), len(plan.fields))
        return len(plan.commands)

    def push(self) -> int:
        """Bring ibsim to the model's state now; returns how many console commands that took."""
        return self.send(self.plan())

    def pull_qos(self, source: QosSource) -> QosChange | None:
        """Apply the QoS tables in force on the fabric to the model; None when they already match."""
        change = apply_qos(self.model, source.read())
        if change is not None:
            log.info("model QoS from the fabric: %s -> %s", change.before, change.after)
        return change

    def _link_command(self, index: int, up: bool) -> str:
        topo = self.model.topology
        link = topo.links[index]
        end = topo.ports[link.a if topo.ports[link.a].kind != "hca" else link.b]
        return f'{"ReLink" if up else "Unlink"} "{end.node_desc}"[{end.number}]'
