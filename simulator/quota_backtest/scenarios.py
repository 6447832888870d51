"""The family of fabric scenarios the quota policy is backtested on (seeded, deterministic).

Each scenario: a fat tree of 2 to 4 leaves with 4 or 8 hosts each, oversubscribed 1:1 to 4:1; two to four
pools of different priority (`hi` > `mid` > `lo`, `lo2`; `hi` and `mid` on SLs and VLs of their own, the
low ones sharing VL 0), each running one multi-node job over 2 to 4 leaves so their rings share the
uplinks (one to three of them congest); the high-priority job's message pattern from compute-bound to
chatty (5 to 100 ms of compute, 1 to 8 GB per all-reduce), the others chatty (2 to 10 ms, 4 to 8 GB); in
half of them a burst (a low-priority job for ten minutes); the ground truth's effects
(`simulator.cluster.effects`) at strengths drawn per scenario. From seed `SEED`, scenarios with an even
index form the development set (looked at while improving the policy), the odd ones the first held-out
set (looked at once, after the first round); `fresh()` draws the second held-out set from `FRESH_SEED` with
the same generator (the claim of round 2, run once at its end), `fresh2()` the third from `FRESH2_SEED` (the
claim of round 3, run once at its end; not in "all"): docs/quota_backtest.md.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

from simulator.cluster.spec import ClusterSpec, FabricSpec, PoolSpec, QosSpec, node_names, validate
from simulator.cluster.workload import JobRequest

HIGH, MID, LOW, LOW2, BURST = "hi", "mid", "lo", "lo2", "burst"
CLASSES = {"normal": 0, "high": 1, "mid": 2}
CLASS_OF = {HIGH: "high", MID: "mid", LOW: "normal", LOW2: "normal", BURST: "normal"}
PRIORITIES = {HIGH: 2, MID: 1, LOW: 0, LOW2: 0, BURST: 0}
DEV, HELD_OUT, FRESH, EXTRA, FRESH2 = "dev", "held-out", "fresh", "extra", "fresh2"
SPLITS = (DEV, HELD_OUT, FRESH, EXTRA, FRESH2)
PREFIX = {FRESH: "f", FRESH2: "g"}  # scenario names: s00 (from SEED and the extra seeds), f00, g00
SEED = 19  # the development and first held-out sets
FRESH_SEED, FRESH_COUNT = 8191, 80  # the second held-out set: seeds never used before it was declared
FRESH2_SEED = 65537  # the third held-out set (FRESH_COUNT scenarios), declared before round 3 ran
EXTRA_SEEDS = tuple(range(100, 120))  # more development scenarios (60 a seed), checked for safety
WORK_SECONDS = 36_000.0  # jobs outlast the run
BURST_AT, BURST_SECONDS = 600.0, 600.0


@dataclass(frozen=True)
class JobPlan:
    """One job: its pool, size and message pattern, when it starts and for how long it runs."""

    pool: str
    nodes: int
    compute_seconds: float
    allreduce_bytes: float
    start: float = 0.0
    work_seconds: float = WORK_SECONDS
    name: str = ""


@dataclass(frozen=True)
class QuotaScenario:
    """One scenario of the family."""

    index: int
    hosts_per_leaf: int
    leaves: int
    oversubscription: float
    pools: tuple[str, ...]
    members: dict[str, tuple[str, ...]]
    jobs: tuple[JobPlan, ...]
    arbitration_packets: bool
    credit_stall: float
    hol_blocking: float
    burst: bool
    split: str = DEV  # DEV, HELD_OUT, FRESH, EXTRA or FRESH2
    seed: int = SEED

    @property
    def name(self) -> str:
        """`s07 3x8 3:1 hi/lo burst` (`f07 ..` in the fresh set, `g07 ..` in the third held-out set,
        `s07@105 ..` from an extra seed)."""
        over = f"{self.oversubscription:g}:1"
        label = PREFIX.get(self.split, "s") + f"{self.index:02d}"
        label += f"@{self.seed}" if self.split == EXTRA else ""
        return f"{label} {self.leaves}x{self.hosts_per_leaf} {over} {'/'.join(self.pools)}" + (
            " burst" if self.burst else ""
        )

    def spec(self, vlarb_low: tuple[tuple[int, int], ...] | None = None) -> ClusterSpec:
        """The cluster, with the default VL arbitration (every data VL at 64) unless given."""
        nodes = node_names(self.leaves * self.hosts_per_leaf)
        return validate(
            ClusterSpec(
                nodes=nodes,
                pools=tuple(PoolSpec(p, self.members[p], CLASS_OF[p]) for p in self.pools),
                fabric=FabricSpec(
                    hosts_per_leaf=self.hosts_per_leaf,
                    oversubscription=self.oversubscription,
                    arbitration_packets=self.arbitration_packets,
                    credit_stall=self.credit_stall,
                    hol_blocking=self.hol_blocking,
                ),
                qos=QosSpec() if vlarb_low is None else QosSpec(vlarb_low=vlarb_low),
                priority_classes=dict(CLASSES),
                tick_seconds=10.0,
            )
        )

    def requests(self) -> list[JobRequest]:
        """The jobs as the model takes them, in submit order."""
        out = []
        for i, job in enumerate(sorted(self.jobs, key=lambda j: j.start)):
            out.append(
                JobRequest(
                    job.pool,
                    job.start,
                    job.nodes * 8,
                    job.work_seconds,
                    compute_seconds=job.compute_seconds,
                    allreduce_bytes=job.allreduce_bytes,
                    name=job.name or f"{job.pool}-{i}",
                )
            )
        return out


class _Placer:
    """Hands out hosts leaf by leaf, round-robin over a job's leaves (so its ring crosses the uplinks)."""

    def __init__(self, leaves: int, hosts: int) -> None:
        self.hosts = hosts
        self.names = node_names(leaves * hosts)
        self.used = [0] * leaves

    def take(self, count: int, leaves: list[int]) -> tuple[str, ...]:
        out: list[str] = []
        while len(out) < count and any(self.used[leaf] < self.hosts for leaf in leaves):
            for leaf in leaves:
                if len(out) < count and self.used[leaf] < self.hosts:
                    out.append(self.names[leaf * self.hosts + self.used[leaf]])
                    self.used[leaf] += 1
        return tuple(out)


def scenario(index: int, seed: int = SEED) -> QuotaScenario:
    """Scenario `index` of the family (the same index and seed give the same scenario). Its split: from
    `SEED`, DEV for an even index and HELD_OUT for an odd one; FRESH from `FRESH_SEED`, FRESH2 from
    `FRESH2_SEED`; EXTRA otherwise.

    Every job is its pool's only job and holds all its pool's nodes, spread round-robin over the leaves
    the scenario uses, so its ring crosses their uplinks (the scheduler fills a pool in node order).
    """
    rng = random.Random(f"quota-backtest/{seed}/{index}")
    hosts = rng.choice((4, 8))
    leaves = rng.choice((2, 3, 4))
    over = rng.choice((1.0, 2.0, 3.0, 4.0))
    spread = rng.randint(2, leaves)  # leaves the jobs span: more leaves, more congested uplinks
    span = sorted(rng.sample(range(leaves), spread))
    pools = [HIGH, LOW]
    if rng.random() < 0.4:
        pools.insert(1, MID)
    if rng.random() < 0.3:
        pools.append(LOW2)
    burst = rng.random() < 0.5
    placer = _Placer(leaves, hosts)
    members: dict[str, tuple[str, ...]] = {}
    jobs: list[JobPlan] = []
    for pool in pools:
        nodes = placer.take(rng.randint(spread, 2 * spread), span)
        if len(nodes) < 2:
            nodes = nodes or placer.take(1, list(range(leaves)))
            members[pool] = nodes
            continue
        members[pool] = nodes
        chatty = pool != HIGH
        jobs.append(
            JobPlan(
                pool,
                len(nodes),
                compute_seconds=rng.choice(
                    (0.002, 0.005, 0.01) if chatty else (0.005, 0.01, 0.02, 0.05, 0.1)
                ),
                allreduce_bytes=rng.choice((4e9, 8e9) if chatty else (1e9, 2e9, 4e9, 8e9)),
                name=f"{pool}-job",
            )
        )
    extra = placer.take(2, span[:2]) if burst else ()
    if len(extra) == 2:
        pools.append(BURST)
        members[BURST] = extra
        jobs.append(
            JobPlan(BURST, 2, 0.002, 8e9, start=BURST_AT, work_seconds=BURST_SECONDS, name="burst-job")
        )
    else:
        burst = False
    return QuotaScenario(
        index=index,
        hosts_per_leaf=hosts,
        leaves=leaves,
        oversubscription=over,
        pools=tuple(p for p in pools if members.get(p)),
        members={p: v for p, v in members.items() if v},
        jobs=tuple(jobs),
        arbitration_packets=rng.random() < 0.7,
        credit_stall=rng.choice((0.0, 0.1, 0.2, 0.3)),
        hol_blocking=rng.choice((0.0, 0.3, 0.6)),
        burst=burst,
        split=_split(index, seed),
        seed=seed,
    )


def _split(index: int, seed: int) -> str:
    if seed == SEED:
        return DEV if index % 2 == 0 else HELD_OUT
    return {FRESH_SEED: FRESH, FRESH2_SEED: FRESH2}.get(seed, EXTRA)


def family(count: int = 60, seed: int = SEED) -> list[QuotaScenario]:
    """The first `count` scenarios of the family."""
    return [scenario(i, seed) for i in range(count)]


def fresh(count: int = FRESH_COUNT) -> list[QuotaScenario]:
    """The second held-out set: the first `count` scenarios drawn from `FRESH_SEED`."""
    return family(count, FRESH_SEED)


def fresh2(count: int = FRESH_COUNT) -> list[QuotaScenario]:
    """The third held-out set: the first `count` scenarios drawn from `FRESH2_SEED`."""
    return family(count, FRESH2_SEED)


def pick(split: str, count: int = 60, fresh_count: int | None = None) -> list[QuotaScenario]:
    """The scenarios of one split, or of DEV, HELD_OUT and FRESH ("all"): the first `count` of the family
    from `SEED`, the first `fresh_count` (default `FRESH_COUNT`) of the fresh set (and of the third
    held-out set, FRESH2, not in "all": it is run once, on the frozen policy), the first `count` from
    each of `EXTRA_SEEDS` (EXTRA, not in "all": 1,200 scenarios take minutes)."""
    out = [s for s in family(count) if split in ("all", s.split)]
    if split in ("all", FRESH):
        out += fresh(FRESH_COUNT if fresh_count is None else fresh_count)
    if split == FRESH2:
        out += fresh2(FRESH_COUNT if fresh_count is None else fresh_count)
    if split == EXTRA:
        out += [s for seed in EXTRA_SEEDS for s in family(count, seed)]
    return out


def options(prog: str, description: str | None = None) -> argparse.ArgumentParser:
    """The command line of the backtest's table: which set (`pick`), how many, and the summary only."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--set", choices=(*SPLITS, "all"), default="all")
    parser.add_argument(
        "--count", type=int, default=60, help="scenarios from each seed but the fresh one (60)"
    )
    parser.add_argument(
        "--fresh", type=int, default=None, help="scenarios of the fresh (and fresh2) set (80)"
    )
    parser.add_argument("--summary", action="store_true", help="the summary only, no line per scenario")
    return parser
