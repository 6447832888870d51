"""Parse `iblinkinfo -l` (one line per port) into logical and physical port states.

```
0x0000000000200002 "  leaf2"  4  1[  ] ==( 4X 2.5 Gbps Active/ LinkUp)==> 0x0000000000100009 8 1[ ] "node5"
```

Switch lines start with the node GUID, CA lines with the port GUID; both are resolved through the
topology. A line that does not parse or holds an unknown node, state or out-of-range number
(docs/fabric-exporter.md) is skipped and counted.
"""

from __future__ import annotations

import re

from exporter.fabric.model import (
    MAX_PORT,
    FabricNode,
    PortKey,
    PortState,
    Topology,
    format_guid,
    number,
    valid_guid,
    valid_lid,
)

_LINE = re.compile(
    r'^0x(?P<guid>[0-9a-fA-F]+)\s+"(?P<desc>.*)"\s+(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\]\s+==\((?P<link>[^)]*)\)==>'
)
_STATES = re.compile(r"(?P<state>[A-Za-z]+)/\s*(?P<phys>[A-Za-z]+)\s*$")

# Names libibmad prints (and common abbreviations) -> IBA PortInfo values.
STATE_IDS: dict[str, int] = {"down": 1, "initialize": 2, "init": 2, "armed": 3, "active": 4, "actdefer": 5}
PHYS_STATE_IDS: dict[str, int] = {
    "sleep": 1,
    "polling": 2,
    "disabled": 3,
    "portconfigurationtraining": 4,
    "training": 4,
    "linkup": 5,
    "linkerrorrecovery": 6,
    "linkerrrecover": 6,
    "phytest": 7,
}


def _index(topology: Topology) -> dict[str, FabricNode]:
    index: dict[str, FabricNode] = {}
    for node in topology.nodes.values():
        for port_guid in node.port_guids.values():
            index[port_guid] = node
    index.update(topology.nodes)
    return index


def parse_iblinkinfo(text: str, topology: Topology) -> tuple[dict[PortKey, PortState], int]:
    """Port states by (node GUID, port), and how many lines were skipped."""
    index = _index(topology)
    states: dict[PortKey, PortState] = {}
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        found = _STATES.search(match.group("link")) if match else None
        node = _node(match, index) if match else None
        port = number(match.group("port")) if match else -1
        if match is None or found is None or node is None or not 1 <= port <= min(node.ports, MAX_PORT):
            skipped += 1
            continue
        state = STATE_IDS.get(found.group("state").lower())
        phys = PHYS_STATE_IDS.get(found.group("phys").lower())
        if state is None and phys is None:
            skipped += 1
            continue
        states[(node.guid, port)] = PortState(state, phys)
    return states, skipped


def _node(match: re.Match[str], index: dict[str, FabricNode]) -> FabricNode | None:
    """The node a line names, when its GUID and LID are in range and discovery knows it."""
    guid = int(match.group("guid"), 16)
    if not valid_guid(guid) or not valid_lid(number(match.group("lid")), unassigned=True):
        return None
    return index.get(format_guid(guid))
