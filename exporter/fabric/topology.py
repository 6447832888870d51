"""Parse `ibnetdiscover` topology output (its default format) into a Topology.

```
switchguid=0x200002(200002)
Switch	8 "S-0000000000200002"		# "leaf2" base port 0 lid 4 lmc 0
[1]	"H-0000000000100008"[1](100009) 		# "node5" lid 8 4xSDR
Ca	1 "H-000000000010000e"		# "node8"
[1](10000f) 	"S-0000000000200002"[4]		# lid 11 lmc 0 "leaf2" lid 4 4xSDR
```

A line that fits none of the known shapes is skipped and counted, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.fabric.model import FabricNode, Link, NodeKind, PortKey, Topology, format_guid

_NODE = re.compile(
    r'^(?P<type>Switch|Ca|Rt)\s+(?P<ports>\d+)\s+"[SHR]-(?P<guid>[0-9a-fA-F]+)"\s*(?:#\s*(?P<rest>.*))?$'
)
_PORT = re.compile(
    r"^\[(?P<port>\d+)\](?:\((?P<pguid>[0-9a-fA-F]+)\))?\s+"
    r'"[SHR]-(?P<rguid>[0-9a-fA-F]+)"\[(?P<rport>\d+)\](?:\([0-9a-fA-F]+\))?\s*(?:#\s*(?P<rest>.*))?$'
)
_SWITCH_COMMENT = re.compile(r'^"(?P<desc>.*)"\s+(?:base|enhanced)\s+port\s+0\s+lid\s+(?P<lid>\d+)\b')
_QUOTED = re.compile(r'^"(?P<desc>.*)"\s*$')
_CA_PORT_LID = re.compile(r"^lid\s+(?P<lid>\d+)\b")
_LINK_RATE = re.compile(r"\b(?P<width>\d+)x(?P<speed>[A-Z][A-Z0-9]*)\b")
_IGNORED_PREFIXES = ("#", "vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")
_KINDS: dict[str, NodeKind] = {"Switch": "switch", "Ca": "ca", "Rt": "router"}


@dataclass
class _NodeBuilder:
    guid: str
    kind: NodeKind
    desc: str
    ports: int
    lid: int | None
    port_lids: dict[int, int] = field(default_factory=dict)
    port_guids: dict[int, str] = field(default_factory=dict)

    def build(self) -> FabricNode:
        return FabricNode(
            self.guid, self.kind, self.desc, self.ports, self.lid, self.port_lids, self.port_guids
        )


def _node(match: re.Match[str]) -> _NodeBuilder:
    kind = _KINDS[match.group("type")]
    guid = format_guid(int(match.group("guid"), 16))
    rest = (match.group("rest") or "").strip()
    desc, lid = "", None
    switch = _SWITCH_COMMENT.match(rest)
    if switch is not None:
        desc, lid = switch.group("desc"), int(switch.group("lid"))
    elif (quoted := _QUOTED.match(rest)) is not None:
        desc = quoted.group("desc")
    return _NodeBuilder(guid, kind, desc, int(match.group("ports")), lid)


def _link(match: re.Match[str]) -> Link:
    rest = match.group("rest") or ""
    rates = _LINK_RATE.findall(rest)
    width, speed = (int(rates[-1][0]), rates[-1][1]) if rates else (None, None)
    return Link(format_guid(int(match.group("rguid"), 16)), int(match.group("rport")), width, speed)


def parse_ibnetdiscover(text: str) -> tuple[Topology, int]:
    """The topology in `text` and how many lines were skipped as unparseable."""
    nodes: list[_NodeBuilder] = []
    links: dict[PortKey, Link] = {}
    skipped = 0
    current: _NodeBuilder | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(_IGNORED_PREFIXES):
            continue
        if (node := _NODE.match(line)) is not None:
            current = _node(node)
            nodes.append(current)
            continue
        port = _PORT.match(line)
        if port is None or current is None:
            skipped += 1
            continue
        number = int(port.group("port"))
        links[(current.guid, number)] = _link(port)
        if current.kind != "switch":
            if port.group("pguid"):
                current.port_guids[number] = format_guid(int(port.group("pguid"), 16))
            lid = _CA_PORT_LID.match((port.group("rest") or "").strip())
            if lid is not None:
                current.port_lids[number] = int(lid.group("lid"))
    built = {n.guid: n.build() for n in nodes}
    for (guid, number), link in list(links.items()):
        links.setdefault((link.remote_guid, link.remote_port), Link(guid, number, link.width, link.speed))
    return Topology(built, links), skipped
