"""The fat tree as indices: ports, links, directed channels and deterministic routes.

Node `i`, HCA port `p` sits on leaf `(i // hosts_per_leaf) * ports_per_node + p` (one rail per HCA port,
as in a rail-optimised DGX cluster), leaf host port `i % hosts_per_leaf + 1`. Leaf uplink `u` goes to spine
`u % spines`. A route from node `a` to node `b` on rail `p` needs both hosts' own cables on that rail up (a
port whose cable is down is out of the subnet); it stays on the leaf when both share it; otherwise it
takes uplink `u = b mod uplinks` (D-mod-k on the destination), or the next `u` whose two leaf-spine links are
up, and comes down the same `u` on the destination leaf. Every link is two directed channels; a channel
transmits on one port and receives on the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.cluster.spec import ClusterSpec

HCA_GUID_BASE = 0xB83FD20300000000
LEAF_GUID_BASE = 0x0002C90300100000
SPINE_GUID_BASE = 0x0002C90300200000


@dataclass(frozen=True)
class Port:
    """One port: HCA port (`kind` hca, `node` set) or switch port (`kind` leaf or spine)."""

    index: int
    kind: str
    node_guid: int
    number: int
    node_desc: str
    node: str | None = None  # the compute node of an HCA port
    rail: int = 0  # HCA port index on its node (mlx5_<rail>)
    switch: int = -1  # leaf or spine number


@dataclass(frozen=True)
class Link:
    """A cable between two ports; channel `2*index` goes a -> b, `2*index + 1` goes b -> a."""

    index: int
    a: int
    b: int
    kind: str  # "host" (HCA - leaf) or "uplink" (leaf - spine)


class Topology:
    """Ports, links and routes of the fat tree a spec describes."""

    def __init__(self, spec: ClusterSpec) -> None:
        fab = spec.fabric
        self.spec = spec
        self.hosts_per_leaf = fab.hosts_per_leaf
        self.rails = spec.ports_per_node
        self.uplinks = fab.uplinks_per_leaf
        self.spines = fab.spine_count
        self.capacity = fab.link_bytes_per_second
        self.node_index = {name: i for i, name in enumerate(spec.nodes)}
        groups = -(-len(spec.nodes) // self.hosts_per_leaf)
        self.leaves = groups * self.rails
        self.ports: list[Port] = []
        self.links: list[Link] = []
        self.hca_port: list[list[int]] = []  # [node][rail] -> port index
        self.host_link: list[list[int]] = []  # [node][rail] -> link index
        self.uplink: list[list[int]] = []  # [leaf][u] -> link index
        self.switch_guids: list[tuple[int, str]] = []
        self._build(spec)
        self.link_of_port = [-1] * len(self.ports)
        for link in self.links:
            self.link_of_port[link.a] = link.index
            self.link_of_port[link.b] = link.index

    def _add_port(self, **kwargs: object) -> int:
        index = len(self.ports)
        self.ports.append(Port(index=index, **kwargs))  # type: ignore[arg-type]
        return index

    def _add_link(self, a: int, b: int, kind: str) -> int:
        self.links.append(Link(len(self.links), a, b, kind))
        return len(self.links) - 1

    def _build(self, spec: ClusterSpec) -> None:
        per_spine = -(-self.uplinks // self.spines)
        leaf_ports: list[dict[int, int]] = [{} for _ in range(self.leaves)]
        for leaf in range(self.leaves):
            guid = LEAF_GUID_BASE + leaf
            desc = f"leaf{leaf + 1:03d}"
            self.switch_guids.append((guid, desc))
            for number in range(1, self.hosts_per_leaf + self.uplinks + 1):
                leaf_ports[leaf][number] = self._add_port(
                    kind="leaf", node_guid=guid, number=number, node_desc=desc, switch=leaf
                )
        spine_ports: list[dict[int, int]] = [{} for _ in range(self.spines)]
        if self.leaves > 1:
            for spine in range(self.spines):
                guid = SPINE_GUID_BASE + spine
                desc = f"spine{spine + 1:02d}"
                self.switch_guids.append((guid, desc))
                for number in range(1, self.leaves * per_spine + 1):
                    spine_ports[spine][number] = self._add_port(
                        kind="spine", node_guid=guid, number=number, node_desc=desc, switch=spine
                    )
        for i, name in enumerate(spec.nodes):
            ports, links = [], []
            for rail in range(self.rails):
                guid = HCA_GUID_BASE + (i << 8) + (rail << 4)
                port = self._add_port(
                    kind="hca",
                    node_guid=guid,
                    number=1,
                    node_desc=f"{name} mlx5_{rail}",
                    node=name,
                    rail=rail,
                )
                leaf = self.leaf_of(i, rail)
                ports.append(port)
                links.append(self._add_link(port, leaf_ports[leaf][i % self.hosts_per_leaf + 1], "host"))
            self.hca_port.append(ports)
            self.host_link.append(links)
        for leaf in range(self.leaves):
            row = []
            for u in range(self.uplinks):
                if self.leaves == 1:
                    row.append(-1)
                    continue
                spine, slot = u % self.spines, u // self.spines
                a = leaf_ports[leaf][self.hosts_per_leaf + 1 + u]
                b = spine_ports[spine][leaf * per_spine + slot + 1]
                row.append(self._add_link(a, b, "uplink"))
            self.uplink.append(row)

    def leaf_of(self, node: int, rail: int) -> int:
        """The leaf that node `node`'s HCA port `rail` is cabled to."""
        return (node // self.hosts_per_leaf) * self.rails + rail

    def route(self, src: int, dst: int, rail: int, link_up: list[bool]) -> tuple[int, ...] | None:
        """Directed channels from node `src` to node `dst` on `rail`; None when no up path exists (either
        host's own cable on that rail down, or no uplink up at both leaves)."""
        out, back = self.host_link[src][rail], self.host_link[dst][rail]
        if not (link_up[out] and link_up[back]):
            return None
        first = 2 * out  # HCA -> leaf
        last = 2 * back + 1  # leaf -> HCA
        a, b = self.leaf_of(src, rail), self.leaf_of(dst, rail)
        if a == b:
            return (first, last)
        for k in range(self.uplinks):
            u = (dst + k) % self.uplinks
            up, down = self.uplink[a][u], self.uplink[b][u]
            if link_up[up] and link_up[down]:
                return (first, 2 * up, 2 * down + 1, last)
        return None

    def channel_ports(self, channel: int) -> tuple[int, int]:
        """(transmitting port, receiving port) of a directed channel."""
        link = self.links[channel >> 1]
        return (link.a, link.b) if channel % 2 == 0 else (link.b, link.a)

    def remote(self, port: int) -> int:
        """The port at the other end of `port`'s cable (-1 when unconnected)."""
        index = self.link_of_port[port]
        if index < 0:
            return -1
        link = self.links[index]
        return link.b if link.a == port else link.a
