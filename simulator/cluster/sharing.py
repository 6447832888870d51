"""Weighted max-min sharing of links: per VL by arbitration weight, then equally among a VL's flows.

On one link of capacity C, VLs share by `foundation.maxmin.weighted_fill` (the one weighted max-min the
quota policy uses too); inside a VL, flows share equally (`water_level`). Across the network, `allocate`
finds each flow's rate as the fixed point of "the least any link on its path offers it, given what the
other flows take", iterated from the flows' demands, then makes it feasible with one pass of the plain
per-link split; flows of one job move together (the slowest ring step sets the pace of a synchronous
all-reduce).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from foundation.maxmin import INF, water_level, weighted_fill

__all__ = ["INF", "Flow", "allocate", "offers", "split_link", "water_level", "weighted_fill"]

MAX_ROUNDS = 12
TOLERANCE = 1e-6


@dataclass(slots=True)
class Flow:
    """One ring step of a job: bytes from one node to the next over `channels` on `vl`."""

    job: int
    channels: tuple[int, ...]
    vl: int
    demand: float  # bytes/s it averages when nothing else limits it
    rate: float = 0.0
    bottleneck: int = -1  # position in `channels` of the link limiting it, -1 when none on its path


def split_link(
    capacity: float,
    members: Sequence[int],
    flows: Sequence[Flow],
    rates: Sequence[float],
    weights: Mapping[int, int],
) -> dict[int, float]:
    """What each flow on a link gets when flows ask for `rates` (never more than asked)."""
    by_vl: dict[int, list[int]] = {}
    for f in members:
        by_vl.setdefault(flows[f].vl, []).append(f)
    vl_alloc = weighted_fill(capacity, {vl: sum(rates[f] for f in fs) for vl, fs in by_vl.items()}, weights)
    out = {}
    for vl, fs in by_vl.items():
        level = water_level(vl_alloc[vl], [rates[f] for f in fs])
        for f in fs:
            out[f] = min(rates[f], level)
    return out


def offers(
    capacity: float,
    members: Sequence[int],
    flows: Sequence[Flow],
    rates: Sequence[float],
    weights: Mapping[int, int],
) -> dict[int, float]:
    """The most each flow on a link could get if it asked for more while the others keep `rates`."""
    total = sum(rates[f] for f in members)
    if total <= capacity:
        slack = capacity - total
        return {f: rates[f] + slack for f in members}
    by_vl: dict[int, list[int]] = {}
    for f in members:
        by_vl.setdefault(flows[f].vl, []).append(f)
    demands = {vl: sum(rates[f] for f in fs) for vl, fs in by_vl.items()}
    out = {}
    for vl, fs in by_vl.items():
        room = weighted_fill(capacity, {**demands, vl: INF}, weights)[vl]
        level = water_level(room, [rates[f] for f in fs])
        spare = room - demands[vl] if level == INF else 0.0
        for f in fs:
            out[f] = rates[f] + spare if level == INF else level
    return out


def allocate(flows: Sequence[Flow], capacity: Sequence[float], weights: Sequence[int]) -> None:
    """Set every flow's `rate` and `bottleneck` (weighted max-min over all links, jobs in lock-step)."""
    lane_weights = dict(enumerate(weights))
    by_job: dict[int, list[int]] = {}
    on_link: dict[int, list[int]] = {}
    load: dict[int, float] = {}
    demand = [0.0] * len(flows)
    for i, flow in enumerate(flows):
        by_job.setdefault(flow.job, []).append(i)
        demand[i] = flow.demand if all(capacity[c] > 0 for c in flow.channels) else 0.0
    for members in by_job.values():  # a broken ring stalls the whole job
        low = min(demand[i] for i in members)
        for i in members:
            demand[i] = low
    for i, flow in enumerate(flows):
        for c in flow.channels:
            on_link.setdefault(c, []).append(i)
            load[c] = load.get(c, 0.0) + demand[i]
    contended = {c: m for c, m in on_link.items() if load[c] > capacity[c] * (1 + 1e-12)}
    rates = list(demand)
    if contended:
        for _ in range(MAX_ROUNDS):
            new = list(demand)
            for c, members in contended.items():
                for f, offer in offers(capacity[c], members, flows, rates, lane_weights).items():
                    new[f] = min(new[f], offer)
            _lock_step(new, by_job)
            change = max(abs(a - b) for a, b in zip(new, rates, strict=True))
            rates = new
            if change <= TOLERANCE * max(capacity):
                break
    own = list(rates)
    where = [-1] * len(flows)
    for c, members in contended.items():
        for f, got in split_link(capacity[c], members, flows, rates, lane_weights).items():
            if got < own[f] or (got <= own[f] and where[f] < 0 and got < demand[f]):
                own[f], where[f] = got, c
    final = list(own)
    _lock_step(final, by_job)
    for i, flow in enumerate(flows):
        flow.rate = final[i]
        limited_here = where[i] >= 0 and own[i] <= final[i] * (1 + 1e-9) and final[i] < demand[i] * (1 - 1e-9)
        stalled = demand[i] == 0.0 and flow.demand > 0
        if stalled:
            flow.bottleneck = next((p for p, c in enumerate(flow.channels) if capacity[c] <= 0), -1)
        else:
            flow.bottleneck = flow.channels.index(where[i]) if limited_here else -1


def _lock_step(rates: list[float], by_job: Mapping[int, list[int]]) -> None:
    for members in by_job.values():
        low = min(rates[i] for i in members)
        for i in members:
            rates[i] = low
