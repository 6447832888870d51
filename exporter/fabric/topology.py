"""Parse `ibnetdiscover` topology output (its default format) into a Topology.

```
switchguid=0x200002(200002)
Switch	8 "S-0000000000200002"		# "leaf2" base port 0 lid 4 lmc 0
[1]	"H-0000000000100008"[1](100009) 		# "node5" lid 8 4xSDR
```

A line that fits none of the known shapes, or holds a number out of its range (docs/fabric-exporter.md),
is skipped and counted, never fatal; the port lines under a skipped node line are skipped with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.fabric.model import (
    LINK_WIDTHS,
    MAX_PORT,
    FabricNode,
    Link,
    NodeKind,
    PortKey,
    Topology,
    format_guid,
    number,
    valid_guid,
    valid_lid,
)

_GUID = r"[0-9a-fA-F]+"
_NODE = re.compile(
    rf'^(?P<type>Switch|Ca|Rt)\s+(?P<ports>\d+)\s+"[SHR]-(?P<guid>{_GUID})"\s*(?:#\s*(?P<rest>.*))?$'
)
_PORT = re.compile(
    rf"^\[(?P<port>\d+)\](?:\((?P<pguid>{_GUID})\))?\s+"
    rf'"[SHR]-(?P<rguid>{_GUID})"\[(?P<rport>\d+)\](?:\({_GUID}\))?\s*(?:#\s*(?P<rest>.*))?$'
)
_SWITCH_COMMENT = re.compile(r'^"(?P<desc>.*)"\s+(?:base|enhanced)\s+port\s+0\s+lid\s+(?P<lid>\d+)(?:\s|$)')
_QUOTED = re.compile(r'^"(?P<desc>.*)"\s*$')
_CA_PORT_LID = re.compile(r"^lid\s+(?P<lid>\d+)(?:\s+lmc\s+(?P<lmc>\d+))?(?:\s|$)")
MAX_LMC = 7  # a port answers on 2**lmc LIDs
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
    port_lmcs: dict[int, int] = field(default_factory=dict)

    def build(self) -> FabricNode:
        return FabricNode(
            self.guid,
            self.kind,
            self.desc,
            self.ports,
            self.lid,
            self.port_lids,
            self.port_guids,
            self.port_lmcs,
        )


def _node(match: re.Match[str]) -> _NodeBuilder | None:
    """The node a node line describes, or None when a number in it is out of range."""
    kind = _KINDS[match.group("type")]
    guid, ports = int(match.group("guid"), 16), number(match.group("ports"))
    rest = (match.group("rest") or "").strip()
    desc, lid = "", None
    switch = _SWITCH_COMMENT.match(rest)
    if switch is not None:
        desc, lid = switch.group("desc"), number(switch.group("lid"))
    elif (quoted := _QUOTED.match(rest)) is not None:
        desc = quoted.group("desc")
    if not valid_guid(guid) or not 1 <= ports <= MAX_PORT or (lid is not None and not valid_lid(lid, True)):
        return None
    return _NodeBuilder(format_guid(guid), kind, desc, ports, lid)


def _link(match: re.Match[str]) -> Link | None:
    """The link a port line describes, or None when a number in it is out of range."""
    remote_guid, remote_port = int(match.group("rguid"), 16), number(match.group("rport"))
    rates = _LINK_RATE.findall(match.group("rest") or "")
    width, speed = (number(rates[-1][0]), rates[-1][1]) if rates else (None, None)
    if not valid_guid(remote_guid) or not 1 <= remote_port <= MAX_PORT:
        return None
    if width is not None and width not in LINK_WIDTHS:
        return None
    return Link(format_guid(remote_guid), remote_port, width, speed)


def _add_port(node: _NodeBuilder, match: re.Match[str], links: dict[PortKey, Link]) -> bool:
    """Record the port line under `node`; False (nothing recorded) when it holds garbage."""
    port = number(match.group("port"))
    link = _link(match)
    if link is None or not 1 <= port <= MAX_PORT:
        return False
    port_guid: int | None = None
    lid: int | None = None
    lmc = 0
    if node.kind != "switch":
        port_guid = int(match.group("pguid"), 16) if match.group("pguid") else None
        found = _CA_PORT_LID.match((match.group("rest") or "").strip())
        lid = number(found.group("lid")) if found is not None else None
        lmc = number(found.group("lmc")) if found is not None and found.group("lmc") else 0
        if (
            (port_guid is not None and not valid_guid(port_guid))
            or (lid is not None and not valid_lid(lid, True))
            or not 0 <= lmc <= MAX_LMC
        ):
            return False
    links[(node.guid, port)] = link
    if port_guid is not None:
        node.port_guids[port] = format_guid(port_guid)
    if lid is not None:
        node.port_lids[port] = lid
        if lmc:
            node.port_lmcs[port] = lmc
    return True


def parse_ibnetdiscover(text: str) -> tuple[Topology, int]:
    """The topology in `text` and how many lines were skipped as unparseable or out of range."""
    nodes: list[_NodeBuilder] = []
    links: dict[PortKey, Link] = {}
    skipped = 0
    current: _NodeBuilder | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(_IGNORED_PREFIXES):
            continue
        if (node_line := _NODE.match(line)) is not None:
            current = _node(node_line)
            if current is None:
                skipped += 1
            else:
                nodes.append(current)
            continue
        port_line = _PORT.match(line)
        if port_line is None or current is None or not _add_port(current, port_line, links):
            skipped += 1
    built = {n.guid: n.build() for n in nodes}
    for (guid, local_port), link in list(links.items()):
        links.setdefault((link.remote_guid, link.remote_port), Link(guid, local_port, link.width, link.speed))
    return Topology(built, links), skipped
