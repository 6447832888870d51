"""One scenario replayed three ways: static weights, the quota policy, the best fixed weights in hindsight.

A run is 30 one-minute cycles on the scenario's model (the ground truth, `simulator.cluster.effects` on).
`static` keeps OpenSM's default arbitration (every data VL at 64). `policy` runs the quota policy every
cycle on the counters of the minute before (`counters.signals`: what Prometheus would show) and applies
each proposal at once (weights as OpenSM would program them, a port group's SL as a QoS policy change).
`hindsight` tries every fixed table of `GRID` (the high-priority pool's VL against every other VL) on its
own run and keeps the one that gives the priority job its best pace while every other pool keeps its
minimum share the whole time.

Measured from minute 5 to the end (a burst runs minutes 10 to 20): the priority job's iteration time over
its time alone on an idle fabric (time-averaged), whether every other pool kept on every link it uses at
least `min(its demand there, min_share x capacity)` at every cycle, and the other pools' jobs' mean
slowdown (their cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from proposals import targets
from recommender.policies.quota import QuotaParams, QuotaPolicy, QuotaState
from simulator.cluster.model import ClusterModel
from simulator.quota_backtest.counters import signals, snapshot
from simulator.quota_backtest.scenarios import HIGH, PRIORITIES, QuotaScenario

CYCLE_SECONDS = 60.0
CYCLES = 30
MEASURE_FROM = 300.0
WITHIN = 1.10  # the priority job's target: within 10% of its time alone
GRID_HIGH = (64, 96, 128, 160, 192, 224, 255)
GRID_OTHERS = (64, 32, 16, 8)
STATIC, POLICY, HINDSIGHT = "static", "policy", "hindsight"


def params() -> QuotaParams:
    """The policy as the backtest runs it: one cycle of persistence and of cooldown."""
    return QuotaParams(
        priorities=dict(PRIORITIES), persistence_seconds=CYCLE_SECONDS, cooldown_seconds=CYCLE_SECONDS
    )


@dataclass(frozen=True)
class Outcome:
    """How one strategy did on one scenario."""

    strategy: str
    hi_slowdown: float | None  # None: the priority job never ran
    min_share_kept: bool
    worst_share: float  # lowest (what another pool got) / (what it was owed) on any link, any cycle
    others_slowdown: float | None
    weights: str  # the arbitration table at the end
    changes: int = 0
    congested_links: int = 0  # switch ports waiting >= 20% that carry pools of different priority

    @property
    def ok(self) -> bool:
        """The priority job within 10% of alone and every other pool at its minimum share."""
        return self.hi_slowdown is not None and self.hi_slowdown <= WITHIN and self.min_share_kept


@dataclass
class _Tally:
    hi: list[float] = field(default_factory=list)
    others: list[float] = field(default_factory=list)
    worst: float = math.inf
    congested: int = 0


def _measure(model: ClusterModel, min_share: float, tally: _Tally) -> None:
    capacity = model.topology.capacity
    for job in model.job_metrics():
        if len(job.nodes) < 2 or not math.isfinite(job.iteration_seconds):
            continue
        (tally.hi if job.pool == HIGH else tally.others).append(job.slowdown)
    sums: dict[tuple[int, str], list[float]] = {}
    for pool, flow in model.flows():
        if pool == HIGH:
            continue
        for c in flow.channels:
            got = sums.setdefault((c, pool), [0.0, 0.0])
            got[0] += flow.rate
            got[1] += flow.demand
    for rate, demand in sums.values():
        owed = min(demand, min_share * capacity)
        if owed > 0:
            tally.worst = min(tally.worst, rate / owed)


def _congested(model: ClusterModel, before: object) -> int:
    view = signals(model, before)  # type: ignore[arg-type]
    ranks = {PRIORITIES.get(p, 0) for p in PRIORITIES}
    return sum(
        1
        for link in view.links.values()
        if link.kind == "fabric"
        and (link.congestion or 0.0) >= 0.2
        and len({PRIORITIES.get(p, 0) for p in link.pools} & ranks) >= 2
    )


def run(
    scenario: QuotaScenario,
    strategy: str,
    vlarb_low: tuple[tuple[int, int], ...] | None = None,
    quota: QuotaParams | None = None,
) -> Outcome:
    """Replay `scenario` with `strategy` (fixed tables given as `vlarb_low` for static and hindsight)."""
    quota = quota or params()
    model = ClusterModel(scenario.spec(vlarb_low), scenario.requests())
    policy = QuotaPolicy(quota) if strategy == POLICY else None
    state = QuotaState()
    tally = _Tally()
    changes = 0
    for cycle in range(CYCLES):
        before = snapshot(model)
        model.advance(CYCLE_SECONDS)
        if cycle == 4 and strategy == STATIC:
            tally.congested = _congested(model, before)
        if policy is not None:
            decision = policy.propose(signals(model, before), state)
            state = decision.state
            for proposal in decision.proposals:
                changes += _apply(model, proposal.changes)
        if model.now > MEASURE_FROM:
            _measure(model, quota.min_share, tally)
    hi = sum(tally.hi) / len(tally.hi) if tally.hi else None
    others = sum(tally.others) / len(tally.others) if tally.others else None
    worst = tally.worst if math.isfinite(tally.worst) else 1.0
    table = ",".join(f"{vl}:{w}" for vl, w in model.qos().vlarb_low)
    return Outcome(strategy, hi, worst >= 1.0 - 1e-6, worst, others, table, changes, tally.congested)


def _apply(model: ClusterModel, changes: tuple[object, ...]) -> int:
    """Apply a proposal's changes to the model as OpenSM would; how many took."""
    qos = model.qos()
    high = ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_high)
    low = ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_low)
    applied = 0
    for change in changes:
        target, after = getattr(change, "target", ""), getattr(change, "after", "")
        if target == targets.VLARB_HIGH:
            high, applied = after, applied + 1
        elif target == targets.VLARB_LOW:
            low, applied = after, applied + 1
        else:
            parsed = targets.parse_target(target)
            if parsed.family == targets.PORT_GROUP_SL and parsed.pool:
                model.set_pool_service_level(parsed.pool, int(after))
                applied += 1
    if high != ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_high) or low != ",".join(
        f"{vl}:{w}" for vl, w in qos.vlarb_low
    ):
        model.set_vl_weights(high, low)
    return applied


def grid(scenario: QuotaScenario) -> list[tuple[tuple[int, int], ...]]:
    """Every fixed table the hindsight search tries (the default first)."""
    spec = scenario.spec()
    vl_of = {p.name: spec.qos.sl2vl[spec.priority_classes[p.priority_class]] for p in spec.pools}
    tables = []
    for a in GRID_HIGH:
        for b in GRID_OTHERS:
            weights = dict(spec.qos.vlarb_low)
            for pool, vl in vl_of.items():
                weights[vl] = a if pool == HIGH else b
            tables.append(tuple(sorted(weights.items())))
    return tables


def hindsight(scenario: QuotaScenario, quota: QuotaParams | None = None) -> Outcome:
    """The best fixed table in hindsight (the priority job's pace first, then the others' cost)."""
    best: Outcome | None = None
    for table in grid(scenario):
        outcome = replace(
            run(scenario, HINDSIGHT, table, quota), weights=",".join(f"{v}:{w}" for v, w in table)
        )
        if not outcome.min_share_kept or outcome.hi_slowdown is None:
            continue
        key = (round(outcome.hi_slowdown, 4), outcome.others_slowdown or 0.0)
        if best is None or key < (round(best.hi_slowdown or 0.0, 4), best.others_slowdown or 0.0):
            best = outcome
    if best is None:
        return Outcome(HINDSIGHT, None, False, 0.0, None, "none kept every minimum share")
    return best
