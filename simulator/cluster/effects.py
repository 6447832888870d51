"""What a real fabric does that weighted max-min leaves out: the ground truth the quota backtest judges by.

Off by default (`FabricSpec` fields at 0 / False): links are then shared by weighted max-min alone, the
model the quota policy predicts with. Turned on: packet granularity (`arbitration_packets`), credit stalls
(`credit_stall`) and head-of-line blocking (`hol_blocking`), each one's formula in docs/simulator.md. A
job's ring steps still move in lock-step, so a victim slows its whole job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.cluster.sharing import Flow

UNIT_BYTES = 64  # VL arbitration weights count 64-byte units


@dataclass(frozen=True)
class FabricEffects:
    """Which effects are on and how strong (the formulas: docs/simulator.md)."""

    arbitration_packets: bool = False
    credit_stall: float = 0.0
    hol_blocking: float = 0.0
    mtu_bytes: int = 4096

    @property
    def on(self) -> bool:
        """Whether any effect changes the rates."""
        return self.arbitration_packets or self.credit_stall > 0 or self.hol_blocking > 0


def effective_weights(weights: Sequence[int], effects: FabricEffects) -> list[int]:
    """Weights rounded up to whole packets a turn (unchanged when granularity is off)."""
    if not effects.arbitration_packets:
        return list(weights)
    units = max(1, effects.mtu_bytes // UNIT_BYTES)
    return [units * math.ceil(w / units) if w > 0 else 0 for w in weights]


def stalled_capacity(flows: Sequence[Flow], capacity: Sequence[float], effects: FabricEffects) -> list[float]:
    """Each channel's capacity less what credit stalls cost it at the flows' offered load."""
    if effects.credit_stall <= 0:
        return list(capacity)
    offered: dict[int, float] = {}
    for flow in flows:
        for c in flow.channels:
            offered[c] = offered.get(c, 0.0) + flow.demand
    out = list(capacity)
    for c, load in offered.items():
        if capacity[c] > 0 and load > capacity[c]:
            backlog = 1.0 - capacity[c] / load
            out[c] = capacity[c] * (1.0 - effects.credit_stall * backlog)
    return out


def block_victims(flows: Sequence[Flow], effects: FabricEffects) -> None:
    """Slow the flows that wait behind held-back flows of their VL (then the jobs' lock-step again)."""
    if effects.hol_blocking <= 0:
        return
    on_channel: dict[int, list[Flow]] = {}
    load: dict[int, float] = {}
    for flow in flows:
        for c in flow.channels:
            on_channel.setdefault(c, []).append(flow)
            load[c] = load.get(c, 0.0) + flow.rate
    cut: dict[int, tuple[float, int]] = {}  # flow index -> (multiplier, channel position where blocked)
    index = {id(f): i for i, f in enumerate(flows)}
    for flow in flows:
        if flow.bottleneck <= 0 or flow.demand <= 0 or flow.rate >= flow.demand:
            continue
        held = 1.0 - flow.rate / flow.demand
        bottleneck = flow.channels[flow.bottleneck]
        for c in flow.channels[: flow.bottleneck]:
            total = load.get(c, 0.0)
            if total <= 0:
                continue
            for victim in on_channel[c]:
                if victim is flow or victim.vl != flow.vl or bottleneck in victim.channels:
                    continue
                share = victim.rate / total
                factor = 1.0 - min(0.95, effects.hol_blocking * held * share)
                i = index[id(victim)]
                if factor < cut.get(i, (1.0, -1))[0]:
                    cut[i] = (factor, victim.channels.index(c))
    for i, (factor, position) in cut.items():
        victim = flows[i]
        victim.rate *= factor
        if victim.rate < victim.demand:
            victim.bottleneck = position
    by_job: dict[int, list[Flow]] = {}
    for flow in flows:
        by_job.setdefault(flow.job, []).append(flow)
    for members in by_job.values():
        low = min(f.rate for f in members)
        for f in members:
            f.rate = low
