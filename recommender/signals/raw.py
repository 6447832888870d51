"""Readings both sources fill in the same shape, so one function (`assemble`) derives the signals."""

from __future__ import annotations

from dataclasses import dataclass, field

from foundation.hostlist import expand_hostlist


@dataclass(frozen=True)
class PortReading:
    """One transmitting port's ratios over the rate window (None: unknown)."""

    kind: str  # "hca" | "fabric"
    owner: str  # node name (hca) or node_guid (fabric)
    device: str  # HCA device name, or the switch's node description
    port: str
    congestion: float | None
    utilization: float | None
    saturated: bool
    vl_congestion: dict[int, float]
    rate_bytes_per_second: float


@dataclass(frozen=True)
class LinkInfo:
    """One cable as `ibpool_fabric_link_info` describes it, seen from a swept port."""

    node_guid: str
    port: str
    node_desc: str
    remote_guid: str
    remote_port: str
    remote_desc: str


@dataclass
class RawData:
    """Everything read in one fetch; `ages` per group (None: not read), `errors` per group."""

    pool_capacity: dict[str, float] = field(default_factory=dict)
    pool_allocated: dict[str, float] = field(default_factory=dict)
    pool_pending: dict[str, float] = field(default_factory=dict)
    pool_utilization: dict[str, float] = field(default_factory=dict)
    pool_nodes: dict[str, set[str]] = field(default_factory=dict)
    node_state: dict[str, str] = field(default_factory=dict)
    node_utilization: dict[str, float] = field(default_factory=dict)
    ports: list[PortReading] = field(default_factory=list)
    links: list[LinkInfo] = field(default_factory=list)
    switches: set[str] = field(default_factory=set)
    routes: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)  # (guid, port) -> hosts
    ages: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def add_route(
    routes: dict[tuple[str, str], tuple[str, ...]], guid: str, port: str, destinations: str
) -> bool:
    """Record one `ibpool_fabric_port_route_info` series (its host list expanded); False when the host list
    does not parse (the caller then drops every route: a partial set of routes is never used)."""
    try:
        hosts = tuple(expand_hostlist(destinations))
    except ValueError:
        return False
    routes[(guid, port)] = tuple(sorted({*routes.get((guid, port), ()), *hosts}))
    return True
