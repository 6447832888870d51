"""Weighted max-min sharing of one link: the single implementation the quota policy and the simulator use.

`weighted_fill` splits a link's capacity among virtual lanes in proportion to their arbitration weights;
a lane that needs less than its share keeps only what it needs and the rest is shared again among the
others (weighted water-filling). Lanes of weight 0 get only what the weighted lanes leave, shared among
themselves by plain water-filling (smallest demand first). `water_level` is the equal share of flows
inside one lane. Demands may be `INF`; nothing here does I/O or keeps state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

INF = float("inf")
EPSILON = 1e-12


def weighted_fill(
    capacity: float, demands: Mapping[int, float], weights: Mapping[int, int]
) -> dict[int, float]:
    """Split `capacity` among lanes by weight (weighted max-min); a lane missing from `weights` has 0."""
    alloc = dict.fromkeys(demands, 0.0)
    remaining = capacity
    active = {lane for lane, d in demands.items() if d > 0 and weights.get(lane, 0) > 0}
    while active and remaining > EPSILON:
        total = sum(weights[lane] for lane in active)
        satisfied = {lane for lane in active if demands[lane] <= remaining * weights[lane] / total}
        if not satisfied:
            for lane in active:
                alloc[lane] = remaining * weights[lane] / total
            return alloc
        for lane in satisfied:
            alloc[lane] = demands[lane]
            remaining -= demands[lane]
        active -= satisfied
    unweighted = sorted((d, lane) for lane, d in demands.items() if d > 0 and weights.get(lane, 0) == 0)
    for i, (demand, lane) in enumerate(unweighted):
        share = max(0.0, remaining) / (len(unweighted) - i)
        alloc[lane] = min(demand, share)
        remaining -= alloc[lane]
    return alloc


def water_level(capacity: float, demands: Sequence[float]) -> float:
    """Equal-share level for flows with `demands` on `capacity` (INF when every demand fits)."""
    remaining, left = capacity, len(demands)
    for demand in sorted(demands):
        share = remaining / left
        if demand > share:
            return share
        remaining -= demand
        left -= 1
    return INF
