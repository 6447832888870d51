"""Which hosts' traffic crosses a switch port, traced from the forwarding tables and the cabling.

`ibpool_fabric_port_route_info` says, per switch port, which destination hosts leave through it. From
every switch with hosts cabled to it (where a source host's traffic enters the fabric), each destination is
followed port by port through those sets and the cabling until it leaves to a host. A port then carries,
for each group of destinations, the hosts of every switch whose paths to them cross it. Rules: a
destination that leaves a switch through several ports is followed through all of them (conservative); a
switch with no route to it ends that path; a path never visits a switch twice. Tracing is done once per
fabric (`traced`, cached by the routes and cabling it came from); `RouteTrace.pools` then answers per
pool assignment, cached too, so a steady cycle costs a dictionary lookup. The rule assumes a pool's
traffic stays between its own hosts or goes to hosts outside the scheduler (storage, login).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recommender.signals.raw import LinkInfo

PortKey = tuple[str, str]  # (switch GUID, port)
Group = tuple[frozenset[str], tuple[str, ...]]  # (switches whose hosts send, destination hosts)
CACHED = 4  # traces kept (a fabric's routes change rarely; two sources may alternate)


def node_of_desc(desc: str) -> str:
    """`node0001 mlx5_0` -> `node0001`."""
    return desc.split(" ", 1)[0] if desc else ""


@dataclass(frozen=True)
class Fabric:
    """What a trace is made from, in a hashable form (its cache key)."""

    links: tuple[tuple[str, str, str, str], ...]  # (guid, port, remote guid, remote desc)
    switches: frozenset[str]
    routes: tuple[tuple[PortKey, tuple[str, ...]], ...]

    @classmethod
    def of(
        cls, links: Iterable[LinkInfo], switches: Iterable[str], routes: Mapping[PortKey, tuple[str, ...]]
    ) -> Fabric:
        """The key of one snapshot's cabling and routes."""
        cabled = tuple(sorted((x.node_guid, x.port, x.remote_guid, x.remote_desc) for x in links))
        return cls(cabled, frozenset(switches), tuple(sorted(routes.items())))


class RouteTrace:
    """The traced paths of one fabric: per switch port, the groups of (senders, destinations) crossing it."""

    def __init__(self, fabric: Fabric) -> None:
        switches = fabric.switches
        self.hosts_under: dict[str, frozenset[str]] = {}
        under: dict[str, set[str]] = defaultdict(set)
        remote: dict[PortKey, str | None] = {}
        for guid, port, remote_guid, remote_desc in fabric.links:
            if guid not in switches:
                continue
            remote[(guid, port)] = remote_guid if remote_guid in switches else None
            if remote_guid not in switches:
                under[guid].add(node_of_desc(remote_desc))
        self.hosts_under = {guid: frozenset(hosts) for guid, hosts in under.items()}
        out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for (guid, port), hosts in fabric.routes:
            for host in hosts:
                out[guid][host].append(port)
        tabled = {guid for (guid, _), _ in fabric.routes}
        self.complete = all(guid in tabled for guid, _ in remote)  # every cabled switch has a table
        self.groups: dict[PortKey, list[Group]] = {}
        if self.complete:
            self._trace(out, remote)
        self._lock = threading.Lock()
        self._pools: tuple[frozenset[tuple[str, tuple[str, ...]]], dict[PortKey, tuple[str, ...]]] | None = (
            None
        )

    def _trace(self, out: dict[str, dict[str, list[str]]], remote: dict[PortKey, str | None]) -> None:
        interned: dict[frozenset[str], frozenset[str]] = {}
        crossing: dict[PortKey, dict[frozenset[str], list[str]]] = defaultdict(lambda: defaultdict(list))
        destinations = sorted({h for table in out.values() for h in table})
        for dest in destinations:
            reach: dict[str, set[str]] = defaultdict(set)  # switch -> entry switches whose paths cross it
            for entry in self.hosts_under:
                stack, seen = [entry], {entry}
                while stack:
                    here = stack.pop()
                    reach[here].add(entry)
                    for port in out.get(here, {}).get(dest, ()):
                        nxt = remote.get((here, port))
                        if nxt is not None and nxt not in seen:
                            seen.add(nxt)
                            stack.append(nxt)
            for here, entries in reach.items():
                ports = out.get(here, {}).get(dest, ())
                if not ports:
                    continue
                key = frozenset(entries)
                key = interned.setdefault(key, key)
                for port in ports:
                    crossing[(here, port)][key].append(dest)
        self.groups = {
            port: [(entries, tuple(dests)) for entries, dests in by.items()] for port, by in crossing.items()
        }

    def pools(self, pools_of_node: Mapping[str, tuple[str, ...]]) -> dict[PortKey, tuple[str, ...]]:
        """Per traced switch port, the pools it carries: X when a path crossing it goes from a host of X
        to a host of X, or to a host the scheduler does not know (absent from `pools_of_node`: storage,
        login; never assumed away). A scheduler node in no pool (`()`) runs no job: no pool's traffic."""
        key = frozenset(pools_of_node.items())
        with self._lock:
            if self._pools is not None and self._pools[0] == key:
                return self._pools[1]
        sending = {
            entry: frozenset(p for h in hosts for p in pools_of_node.get(h, ()))
            for entry, hosts in self.hosts_under.items()
        }
        senders: dict[frozenset[str], frozenset[str]] = {}
        result: dict[PortKey, tuple[str, ...]] = {}
        for port, groups in self.groups.items():
            carried: set[str] = set()
            for entries, dests in groups:
                src = senders.get(entries)
                if src is None:
                    src = senders[entries] = frozenset(p for e in entries for p in sending.get(e, ()))
                if not src:
                    continue
                wanted: set[str] = set()
                for dest in dests:
                    of = pools_of_node.get(dest)
                    if of is None:  # not a scheduler node (storage, login): whoever reaches it
                        wanted = set(src)
                        break
                    wanted.update(of)
                carried |= src & wanted
            result[port] = tuple(sorted(carried))
        with self._lock:
            self._pools = (key, result)
        return result


_CACHE: dict[Fabric, RouteTrace] = {}
_CACHE_LOCK = threading.Lock()


def traced(
    links: Iterable[LinkInfo], switches: Iterable[str], routes: Mapping[PortKey, tuple[str, ...]]
) -> RouteTrace:
    """The trace of this cabling and these routes: made once, then taken from the cache."""
    fabric = Fabric.of(links, switches, routes)
    with _CACHE_LOCK:
        found = _CACHE.get(fabric)
    if found is not None:
        return found
    made = RouteTrace(fabric)
    with _CACHE_LOCK:
        while len(_CACHE) >= CACHED:
            del _CACHE[next(iter(_CACHE))]
        _CACHE[fabric] = made
    return made
