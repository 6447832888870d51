"""CPU time of one recommendation cycle (policies + proposal building) for 10,000 GPUs, fetch excluded.

A synthetic Signals snapshot: 1,250 nodes of 8 GPUs in 16 pools, 2,500 links (1,250 HCA ports and 1,250
switch ports, every uplink shared by two pools of different rank), a few stalled links. The rebalance
planner's history holds a week of one-minute samples per pool (every third pool short by 128 GPUs for the
last 12 hours, the others idle at a seventh of their nodes), so the planner forecasts, values and lends.
It prints the first cycle after a restart (every pool's outlook fed from the week of samples) and the
steady cycle (one new sample per pool). Then the snapshot's assembly from raw readings on a routed fat
tree of the same 1,250 nodes (40 leaves of 32 hosts, 16 spines, destination-mod-k forwarding tables as
`ibpool_fabric_port_route_info` has them): without routes (the cabling decides), with routes the first
time (the paths traced), again (the trace cached), and after a pool change (the trace cached, the pools
of every port worked out again); and the policies' cycle on the routed snapshot. Prints the figures.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace

from recommender.cycle import Recommender
from recommender.policies.quota import QuotaParams, QuotaPolicy
from recommender.signals import routes as traces
from recommender.signals.assemble import assemble
from recommender.signals.model import LinkSignals, NodeSignals, PoolSignals, QosSignals, Signals
from recommender.signals.raw import LinkInfo, PortReading, RawData

NODES, POOLS, LINKS, CAP = 1250, 16, 2500, 50e9
HOSTS_PER_LEAF, SPINES = 32, 16


def snapshot(at: float) -> Signals:
    """The synthetic cluster."""
    pool_of = {f"node{i:05d}": f"pool{i % POOLS:02d}" for i in range(NODES)}
    nodes = {
        n: NodeSignals(n, (p,), "allocated" if i % 7 else "idle", 0.3, 1.0)
        for i, (n, p) in enumerate(pool_of.items())
    }
    pools = {
        f"pool{k:02d}": PoolSignals(f"pool{k:02d}", 625, 560, 128 if k % 3 == 0 else 0, 11, 0.3, 1.0)
        for k in range(POOLS)
    }
    links: dict[str, LinkSignals] = {}
    names = list(pool_of)
    for node in names:
        key = f"{node}/mlx5_0/1"
        links[key] = LinkSignals(key, "hca", node, node, 0.3, 0.5, False, (pool_of[node],), {}, CAP, 1.0)
    for i in range(LINKS - NODES):
        a, b = pool_of[names[i]], pool_of[names[(i + 1) % NODES]]
        key = f"0x{i:016x}/1"
        links[key] = LinkSignals(
            key, "fabric", None, f"leaf{i}", 0.4 if i % 2 == 0 else 0.05, 0.95, False, (a, b), {}, CAP, 1.0
        )
    qos = QosSignals(
        "",
        ",".join(f"{v}:32" for v in range(8)),
        tuple(range(8)) * 2,
        {f"pool{k:02d}": k % 8 for k in range(POOLS)},
        0.0,
    )
    return Signals(at, 300.0, "synthetic", pools, nodes, links, qos)


def routed_raw() -> RawData:
    """The same nodes and pools on a fat tree with forwarding tables, as raw readings."""
    raw = RawData()
    names = [f"node{i:05d}" for i in range(NODES)]
    for i, name in enumerate(names):
        pool = f"pool{i % POOLS:02d}"
        raw.pool_nodes.setdefault(pool, set()).add(name)
        raw.pool_capacity[pool] = raw.pool_capacity.get(pool, 0.0) + 8
        raw.node_state[name] = "allocated"
        raw.node_utilization[name] = 0.3
    leaves = -(-NODES // HOSTS_PER_LEAF)
    leaf = [f"0x{0x100000 + n:016x}" for n in range(leaves)]
    spine = [f"0x{0x200000 + s:016x}" for s in range(SPINES)]
    raw.switches = set(leaf) | set(spine)
    for n, name in enumerate(names):
        raw.links.append(LinkInfo(leaf[n // HOSTS_PER_LEAF], str(n % HOSTS_PER_LEAF + 1), "leaf", "0x1", "1",
                                  f"{name} mlx5_0"))  # fmt: skip
    for n, guid in enumerate(leaf):
        for s, top in enumerate(spine):
            up = str(HOSTS_PER_LEAF + 1 + s)
            raw.links += [LinkInfo(guid, up, "leaf", top, str(n + 1), "spine"),
                          LinkInfo(top, str(n + 1), "spine", guid, up, "leaf")]  # fmt: skip
    for n, guid in enumerate(leaf):
        table: dict[str, list[str]] = {}
        for d, name in enumerate(names):
            home = d // HOSTS_PER_LEAF
            port = d % HOSTS_PER_LEAF + 1 if home == n else HOSTS_PER_LEAF + 1 + d % SPINES
            table.setdefault(str(port), []).append(name)
        raw.routes.update({(guid, port): tuple(hosts) for port, hosts in table.items()})
    for top in spine:
        for n in range(leaves):
            raw.routes[(top, str(n + 1))] = tuple(names[n * HOSTS_PER_LEAF : (n + 1) * HOSTS_PER_LEAF])
    quiet = dict.fromkeys(range(8), 0.0)
    for link in raw.links:
        if link.node_guid in raw.switches:
            raw.ports.append(
                PortReading("fabric", link.node_guid, link.node_desc, link.port, 0.05, 0.5, False, quiet, CAP)
            )
    raw.ages = {"pools": 0.0, "nodes": 0.0, "links": 0.0}
    return raw


def timed_assembly(raw: RawData, qos: QosSignals, at: float) -> tuple[Signals, float]:
    """The snapshot assembled from `raw` and the CPU seconds it took."""
    start = time.process_time()
    made = assemble(
        raw, taken_at=at, window_seconds=300.0, source="synthetic", max_age_seconds=600.0, qos=qos
    )
    return made, time.process_time() - start


def routed(recommender: Recommender, qos: QosSignals, at: float) -> None:
    """Assembly without and with routes (cold, cached, new pools), then a cycle on the routed snapshot."""
    raw = routed_raw()
    plain = RawData(**{**vars(raw), "routes": {}})
    _, without = timed_assembly(plain, qos, at)
    traces._CACHE.clear()
    routed_signals, cold = timed_assembly(raw, qos, at)
    _, warm = timed_assembly(raw, qos, at)
    moved = RawData(**{**vars(raw), "pool_nodes": {p: set(n) for p, n in raw.pool_nodes.items()}})
    moved.pool_nodes["pool00"].add("node00001")  # a node lent to another pool
    _, repooled = timed_assembly(moved, qos, at)
    uplinks = [x for x in routed_signals.links.values() if x.kind == "fabric" and x.desc == "leaf"]
    shared = sum(len(x.pools) for x in uplinks) / max(1, len(uplinks))
    start = time.process_time()
    recommender.evaluate(replace(routed_signals, taken_at=at + 3600.0))
    cycle = time.process_time() - start
    print(
        f"routed fat tree: {len(raw.switches)} switches, {len(raw.routes)} switch ports with routes, "
        f"{len(routed_signals.links)} links; a leaf uplink carries {shared:.1f} pools on average"
    )
    print(f"  assembly without routes (the cabling decides): {without:.3f} s CPU")
    print(f"  assembly with routes, first (paths traced): {cold:.3f} s CPU")
    print(f"  assembly with routes, again (trace cached): {warm:.3f} s CPU")
    print(f"  assembly with routes after a pool change (trace cached, pools again): {repooled:.3f} s CPU")
    print(f"  policies' cycle on the routed snapshot: {cycle:.3f} s CPU (target < 1 s with the assembly)")


class Fixed:
    """Returns the prepared snapshot (the fetch is excluded from the measurement)."""

    name = "synthetic"

    def __init__(self, signals: Signals) -> None:
        self.signals = signals

    def fetch(self) -> Signals:
        return self.signals

    def reset(self) -> None:
        pass


def main() -> int:
    """Build the snapshot, then time `evaluate` (both policies and proposal building)."""
    signals = snapshot(1_800_000_000.0)
    ranks = {f"pool{k:02d}": k % 4 for k in range(POOLS)}
    quota = QuotaPolicy(QuotaParams(priorities=ranks, persistence_seconds=0.0, cooldown_seconds=0.0))
    recommender = Recommender(Fixed(signals), store=None, quota=quota)  # type: ignore[arg-type]
    week = 7 * 1440
    now = signals.taken_at
    for k in range(POOLS):
        pool = f"pool{k:02d}"
        short = k % 3 == 0
        q = recommender.history.samples.setdefault(pool, deque())
        for m in range(week, 0, -1):
            waiting = 128 if short and m <= 720 else 0
            q.append((now - 60.0 * m, waiting, 560 + waiting))
    recommender.history.started = now - 60.0 * week
    start = time.process_time()
    first = recommender.evaluate(signals)
    cold = time.process_time() - start
    best = float("inf")
    for i in range(5):
        later = replace(signals, taken_at=now + 60.0 * (i + 1))
        start = time.process_time()
        found = recommender.evaluate(later)
        best = min(best, time.process_time() - start)
    gpus = sum(p.capacity_gpus for p in signals.pools.values())
    print(
        f"recommend cycle: {gpus} GPUs, {len(signals.nodes)} nodes, {len(signals.pools)} pools, "
        f"{len(signals.links)} links"
    )
    for label, made in (("first cycle", first), ("steady cycle", found)):
        kinds = ", ".join(sorted({p.kind for p in made.proposals}))
        print(f"  {label} proposals: {len(made.proposals)} ({kinds})")
    print(f"  first cycle after a restart (a week of samples fed to the planner): {cold:.3f} s CPU")
    print(f"  CPU time per cycle (best of 5, fetch excluded): {best:.3f} s (target < 1 s)")
    assert signals.qos is not None
    routed(recommender, signals.qos, now + 360.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
