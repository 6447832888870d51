"""RawData -> Signals: the one place where both sources' readings become the same snapshot."""

from __future__ import annotations

from recommender.signals.model import (
    LINKS,
    NODES,
    POOLS,
    QOS,
    LinkSignals,
    Missing,
    NodeSignals,
    PoolSignals,
    QosSignals,
    Signals,
)
from recommender.signals.raw import RawData
from recommender.signals.topology import FabricTopology

IDLE = "idle"
OFFLINE = frozenset({"down", "drained", "draining"})


def _staleness(raw: RawData, group: str, max_age: float) -> list[Missing]:
    if group in raw.errors:
        return [Missing(group, raw.errors[group])]
    age = raw.ages.get(group)
    if age is None:
        return [Missing(group, "not read")]
    if age > max_age:
        return [Missing(group, f"stale: {age:.0f} s old, more than {max_age:.0f} s")]
    return []


def assemble(
    raw: RawData,
    *,
    taken_at: float,
    window_seconds: float,
    source: str,
    max_age_seconds: float,
    qos: QosSignals | None,
    qos_error: str | None = None,
) -> Signals:
    """The snapshot, with every missing or stale group (and node without GPU data) listed."""
    missing: list[Missing] = []
    for group in (POOLS, NODES, LINKS):
        missing += _staleness(raw, group, max_age_seconds)
    if qos is None:
        missing.append(Missing(QOS, qos_error or "not read"))
    elif qos.age_seconds > max_age_seconds:
        missing.append(Missing(QOS, f"stale: {qos.age_seconds:.0f} s old"))
    pool_age = raw.ages.get(POOLS) or 0.0
    node_age = raw.ages.get(NODES) or 0.0
    link_age = raw.ages.get(LINKS) or 0.0
    pools_of: dict[str, list[str]] = {}
    for pool, members in raw.pool_nodes.items():
        for node in members:
            pools_of.setdefault(node, []).append(pool)
    pools_of_node = {n: tuple(sorted(p)) for n, p in pools_of.items()}
    for name in raw.node_state:  # a scheduler node in no pool runs no job; a host it does not know is absent
        pools_of_node.setdefault(name, ())
    nodes: dict[str, NodeSignals] = {}
    for name in sorted(set(raw.node_state) | set(raw.node_utilization)):
        state = raw.node_state.get(name, "unknown")
        util = raw.node_utilization.get(name)
        if util is None and state not in OFFLINE and NODES not in raw.errors:
            missing.append(Missing(f"{NODES}.{name}", "no GPU utilization"))
        nodes[name] = NodeSignals(name, pools_of_node.get(name, ()), state, util, node_age)
    pools: dict[str, PoolSignals] = {}
    for name in sorted(raw.pool_capacity):
        members = raw.pool_nodes.get(name, set())
        pools[name] = PoolSignals(
            name=name,
            capacity_gpus=int(raw.pool_capacity[name]),
            allocated_gpus=int(raw.pool_allocated.get(name, 0.0)),
            pending_gpus=int(raw.pool_pending.get(name, 0.0)),
            idle_nodes=sum(1 for n in members if raw.node_state.get(n) == IDLE),
            utilization=raw.pool_utilization.get(name),
            age_seconds=pool_age,
        )
    topo = FabricTopology(raw.links, raw.switches, pools_of_node, raw.routes)
    links: dict[str, LinkSignals] = {}
    for p in raw.ports:
        owner: str | None
        if p.kind == "hca":
            key, owner, desc = f"{p.owner}/{p.device}/{p.port}", p.owner, p.owner
            crossing = pools_of_node.get(p.owner, ())
        else:
            key, owner, desc = f"{p.owner}/{p.port}", None, p.device
            crossing = topo.pools_of_port(p.owner, p.port)
        links[key] = LinkSignals(
            key=key,
            kind=p.kind,
            node=owner,
            desc=desc,
            congestion=p.congestion,
            utilization=p.utilization,
            saturated=p.saturated,
            pools=crossing,
            vl_congestion=dict(p.vl_congestion),
            rate_bytes_per_second=p.rate_bytes_per_second,
            age_seconds=link_age,
        )
    return Signals(
        taken_at=taken_at,
        window_seconds=window_seconds,
        source=source,
        pools=pools,
        nodes=nodes,
        links=links,
        qos=qos,
        missing=tuple(missing),
    )
