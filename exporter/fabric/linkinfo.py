"""Parse `iblinkinfo -l` (one line per port) into logical and physical port states.

```
0x0000000000200002 "  leaf2"  4  1[  ] ==( 4X 2.5 Gbps Active/ LinkUp)==> 0x0000000000100009 8 1[ ] "node5"
0x0000000000200002 "  leaf2"  4  5[  ] ==(               Down/ Polling)==>             [  ] ""
```

Switch lines start with the node GUID, CA lines with the port GUID; both are resolved through the
topology. A line that does not parse, or names a node or state it does not know, is skipped and counted.
"""

from __future__ import annotations

import re

from exporter.fabric.model import FabricNode, PortKey, PortState, Topology, format_guid

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
        node = index.get(format_guid(int(match.group("guid"), 16))) if match else None
        if match is None or found is None or node is None:
            skipped += 1
            continue
        state = STATE_IDS.get(found.group("state").lower())
        phys = PHYS_STATE_IDS.get(found.group("phys").lower())
        if state is None and phys is None:
            skipped += 1
            continue
        states[(node.guid, int(match.group("port")))] = PortState(state, phys)
    return states, skipped
