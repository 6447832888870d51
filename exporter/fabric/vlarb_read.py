"""Which switch ports a sweep reads VL arbitration tables from, and what one read gave.

`first`: one active port per switch (OpenSM programs every switch port alike unless a per-port-type
`qos_*` key says otherwise, so one port shows the switch's tables); `all`: every active port; `off`: none.
A port is active when iblinkinfo says so (state 4); without port states, when discovery found it cabled.

Cost (ibsim + OpenSM, 24 switches with 800 active ports, concurrency 4, median sweep): off 348 ms,
first 403 ms, all 2.31 s; each read is one smpquery process (~2.5 ms of sweep time at concurrency 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from exporter.fabric.model import FabricNode, PortKey, PortState, Topology, VlarbReading
from foundation.commands import CommandResult
from foundation.vlarb import VlarbParseError, parse_vlarb

VlarbMode = Literal["off", "first", "all"]
VLARB_MODES: tuple[VlarbMode, ...] = ("off", "first", "all")
ACTIVE = 4


def active_ports(node: FabricNode, topology: Topology, states: Mapping[PortKey, PortState]) -> list[int]:
    """The ports of `node` that carry traffic, in port order."""
    out: list[int] = []
    for port in range(1, node.ports + 1):
        state = states.get((node.guid, port))
        if state is not None and state.state_id is not None:
            if state.state_id == ACTIVE:
                out.append(port)
        elif (node.guid, port) in topology.links:
            out.append(port)
    return out


def vlarb_targets(
    topology: Topology, states: Mapping[PortKey, PortState], mode: VlarbMode
) -> list[tuple[PortKey, int]]:
    """(switch GUID and port, LID) of every port to read in this sweep."""
    if mode == "off":
        return []
    targets: list[tuple[PortKey, int]] = []
    for switch in topology.switches:
        if not switch.lid:
            continue
        ports = active_ports(switch, topology, states)
        targets += [((switch.guid, port), switch.lid) for port in ports[: 1 if mode == "first" else None]]
    return targets


def vlarb_reading(result: CommandResult) -> VlarbReading:
    """The tables `smpquery vlarb` printed, or why there are none."""
    if not result.ok:
        return VlarbReading(None, result.describe())
    try:
        return VlarbReading(parse_vlarb(result.stdout))
    except VlarbParseError as exc:
        return VlarbReading(None, f"smpquery: {exc}")
