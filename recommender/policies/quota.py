"""Bandwidth quotas: VL-arbitration weights (or a port group's SL) for stalled high-priority pools.

Pure logic over `Signals` (no I/O, no clock: time is `signals.taken_at`). Rules:
1. A link is shared and congested when pools of different priority cross it and its wait share is at least
   `congestion_threshold` (or its 32-bit wait counter is saturated while it is at least `busy_utilization`
   busy: a saturated counter is never read as idle).
2. The highest-priority pool H on it stalls when its nodes' mean GPU utilization is at most
   `stall_utilization` while its HCA ports wait (wait share >= `port_wait_threshold`, or saturated).
   H also stalls, whatever its GPUs do, when its ports wait at least `held_back_wait` (its ring steps are
   held back that share of the time: it runs about that much slower than alone).
3. Held for `persistence_seconds`, and no quota proposal within `cooldown_seconds`, on the stalled link
   where H's VL waits most:
   - H shares a VL with a lower pool: move H's port group to an SL on a VL of its own;
   - otherwise raise H's VL weight and lower the lower pools' VLs there by the least step that the
     weighted max-min prediction says gives H its demand (offered load of its ports), else the largest
     that still helps; nothing when the weights already do. A step is at most `max_step`, or the raise
     that sends H one more packet a turn. The arbitration is not observed, so weights are read two ways
     (byte exact, whole `arbitration_unit`s a turn) and a lower VL that the port shows not waiting may
     want nothing more: a step must give H 1% more under one reading and lose under none (by 1%); the
     target is judged on the worst. A congested link's capacity is what it measurably sends (credit stalls).
   - the floors: the table is fabric-wide, so on every switch port, under both readings, each lower
     pool that may cross it (`LinkSignals.pools`: by the routes, else by whose hosts sit under it) keeps
     `min_share` of the port's
     rate, against the acted-on link's measured throughput, times `min_share_margin` (a port sends less
     as its load grows, head-of-line blocking takes from a lower VL); a VL of two such pools keeps two.
     A lowered VL may get weight back, up to a whole packet more than it had, to keep them.
4. A pool whose nodes' GPU load surges (`surge_delta` over its calm baseline on `surge_fraction` of its
   nodes) while its ports wait on a shared congested link moves to the SL of the top pool on that link.
Missing signals (links, nodes, qos, pools) mean no proposal: `QuotaDecision.missing` says which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from foundation.maxmin import weighted_fill
from proposals import targets
from proposals.model import Change, Evidence, Proposal
from recommender.signals.model import LINKS, NODES, POOLS, QOS, LinkSignals, Missing, QosSignals, Signals

__all__ = ["QuotaDecision", "QuotaParams", "QuotaPolicy", "QuotaState", "weighted_fill"]

NAME = "quota"
INF = math.inf
NEEDED = (LINKS, NODES, QOS, POOLS)
OFFLINE = frozenset({"down", "drained", "draining"})


@dataclass(frozen=True)
class QuotaParams:
    """Thresholds (ratios 0-1), steps and hysteresis (seconds)."""

    priorities: Mapping[str, int] = field(default_factory=dict)  # pool -> rank, higher wins; default 0
    congestion_threshold: float = 0.2
    busy_utilization: float = 0.9
    stall_utilization: float = 0.5
    port_wait_threshold: float = 0.05
    held_back_wait: float = 0.08  # H's ports waiting this much stall it whatever its GPUs do (~9% slower)
    arbitration_unit: int = 64  # weight units a VL sends at least a turn: one 4 KiB packet (MTU / 64 B)
    max_step: int = 32
    min_share: float = 0.1
    min_share_margin: float = 1.1  # floors keep 10% more than min_share (a port sends less as load grows)
    target_tolerance: float = 0.02
    persistence_seconds: float = 120.0
    cooldown_seconds: float = 600.0
    surge_delta: float = 0.3
    surge_fraction: float = 0.5
    expires_seconds: float = 3600.0


@dataclass(frozen=True)
class QuotaState:
    """Hysteresis memory carried from one cycle to the next."""

    first_seen: Mapping[str, float] = field(default_factory=dict)
    last_proposed: Mapping[str, float] = field(default_factory=dict)
    baseline_util: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaDecision:
    """What one evaluation proposes, what it lacked, and the state for the next one."""

    proposals: tuple[Proposal, ...]
    missing: tuple[Missing, ...]
    state: QuotaState
    notes: tuple[str, ...] = ()


def _window(seconds: float) -> str:
    return f"{max(1, round(seconds))}s"


def effective_weights(qos: QosSignals) -> dict[int, int]:
    """Weight per VL: its `qos_vlarb_high` plus its `qos_vlarb_low` entry."""
    weights: dict[int, int] = {}
    for table in (qos.vlarb_high, qos.vlarb_low):
        for vl, w in targets.parse_vlarb(table) if table else ():
            weights[vl] = weights.get(vl, 0) + w
    return weights


class QuotaPolicy:
    """Propose VL weight or port-group SL changes from Signals."""

    name = NAME

    def __init__(self, params: QuotaParams | None = None) -> None:
        self.params = params or QuotaParams()
        self._cache: tuple[Signals, dict[str, list[str]], dict[str, list[LinkSignals]]] | None = None

    def rank(self, pool: str) -> int:
        """A pool's priority rank."""
        return self.params.priorities.get(pool, 0)

    def propose(self, signals: Signals, state: QuotaState | None = None) -> QuotaDecision:
        """One evaluation; deterministic for given signals and state."""
        state = state or QuotaState()
        lacking = signals.lacking(NEEDED)
        if lacking or signals.qos is None:
            return QuotaDecision((), tuple(lacking) or (Missing(QOS, "not read"),), state)
        now, qos, p = signals.taken_at, signals.qos, self.params
        first = dict(state.first_seen)
        notes: list[str] = []
        stalls = self._stalls(signals)
        for key in list(first):
            if key.startswith("stall:") and key not in stalls:
                del first[key]
        ready: list[tuple[str, LinkSignals, str]] = []
        for key, (link, top) in sorted(stalls.items()):
            first.setdefault(key, now)
            if now - first[key] >= p.persistence_seconds:
                ready.append((key, link, top))
            else:
                notes.append(
                    f"{key}: waiting for persistence ({now - first[key]:.0f}/{p.persistence_seconds:.0f} s)"
                )
        proposals: list[Proposal] = []
        last = dict(state.last_proposed)
        if ready and now - last.get("quota", -INF) >= p.cooldown_seconds:
            _, link, top = max(ready, key=lambda r: self._urgency(qos, r[1], r[2], r[0]))
            proposal = self._for_link(signals, qos, link, top, notes)
            if proposal is not None:
                proposals.append(proposal)
                last["quota"] = now
        elif ready:
            notes.append("quota proposals cooling down")
        surge, baseline = self._surges(signals, state, first, last, notes)
        proposals += surge
        return QuotaDecision(tuple(proposals), (), QuotaState(first, last, baseline), tuple(notes))

    # --- detection ----------------------------------------------------------------------------------

    def _urgency(
        self, qos: QosSignals, link: LinkSignals, top: str, key: str
    ) -> tuple[int, float, float, str]:
        """Which stalled link to act on first: the top pool's rank, then how long its VL waits there (where
        it is held back), then how busy the link is."""
        vl = qos.vl_of(top)
        waiting = link.vl_congestion.get(vl, 0.0) if vl is not None else 0.0
        return self.rank(top), waiting, link.utilization or 0.0, key

    def _congested(self, link: LinkSignals) -> bool:
        p = self.params
        if link.congestion is not None:
            return link.congestion >= p.congestion_threshold
        return link.saturated and (link.utilization or 0.0) >= p.busy_utilization

    def _pool_nodes(self, signals: Signals, pool: str) -> list[str]:
        index = self._index(signals)
        return index[0].get(pool, [])

    def _index(self, signals: Signals) -> tuple[dict[str, list[str]], dict[str, list[LinkSignals]]]:
        """Per pool: its online nodes and their HCA ports (built once per snapshot)."""
        cached = self._cache
        if cached is not None and cached[0] is signals:
            return cached[1], cached[2]
        nodes: dict[str, list[str]] = {}
        for n in signals.nodes.values():
            if n.state not in OFFLINE:
                for pool in n.pools:
                    nodes.setdefault(pool, []).append(n.name)
        ports: dict[str, list[LinkSignals]] = {}
        for link in signals.links.values():
            owner = signals.nodes.get(link.node or "") if link.kind == "hca" else None
            if owner is not None and owner.state not in OFFLINE:
                for pool in owner.pools:
                    ports.setdefault(pool, []).append(link)
        self._cache = (signals, nodes, ports)
        return nodes, ports

    def _waits(self, signals: Signals, pool: str) -> tuple[float, LinkSignals | None]:
        """The largest wait share of a pool's HCA ports (1.0 for a saturated one), and that port."""
        worst, where = 0.0, None
        for link in self._index(signals)[1].get(pool, []):
            value = 1.0 if link.saturated else (link.congestion or 0.0)
            if value >= worst:
                worst, where = value, link
        return worst, where

    def _utilization(self, signals: Signals, pool: str) -> float | None:
        values = [signals.nodes[n].gpu_utilization for n in self._pool_nodes(signals, pool)]
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known and len(known) == len(values) else None

    def _stalls(self, signals: Signals) -> dict[str, tuple[LinkSignals, str]]:
        """`stall:<link>:<pool>` -> (link, top pool) for every shared congested link whose top pool stalls."""
        p = self.params
        out: dict[str, tuple[LinkSignals, str]] = {}
        for link in signals.links.values():
            if len(link.pools) < 2 or not self._congested(link):
                continue
            ranks = sorted({self.rank(x) for x in link.pools})
            if len(ranks) < 2:
                continue
            tops = [x for x in link.pools if self.rank(x) == ranks[-1]]
            if len(tops) != 1:
                continue
            util = self._utilization(signals, tops[0])
            wait, _ = self._waits(signals, tops[0])
            idle = util is not None and util <= p.stall_utilization and wait >= p.port_wait_threshold
            if idle or wait >= p.held_back_wait:
                out[f"stall:{link.key}:{tops[0]}"] = (link, tops[0])
        return out

    # --- proposals ----------------------------------------------------------------------------------

    def _evidence(self, signals: Signals, link: LinkSignals, top: str) -> tuple[Evidence, ...]:
        p, window = self.params, _window(signals.window_seconds)
        if link.kind == "fabric":
            guid, port = link.key.split("/")
            sel = f'{{node_guid="{guid}",port="{port}"}}'
            cong_q = f"fabric_port:ibpool_fabric_port_congestion:ratio_rate5m{sel}"
            util_q = f"fabric_port:ibpool_fabric_port_transmit_utilization:ratio_rate5m{sel}"
        else:
            node, device, port = link.key.split("/")
            sel = f'{{node="{node}",device="{device}",port="{port}"}}'
            cong_q = f"port:ibpool_infiniband_congestion:ratio_rate5m{sel}"
            util_q = f"port:ibpool_infiniband_transmit_utilization:ratio_rate5m{sel}"
        items = []
        if link.congestion is not None:
            items.append(Evidence(cong_q, window, link.congestion, p.congestion_threshold))
        else:
            items.append(
                Evidence(
                    f"{util_q} (wait counter saturated)", window, link.utilization or 0.0, p.busy_utilization
                )
            )
        util = self._utilization(signals, top) or 0.0
        items.append(
            Evidence(
                f'avg GPU utilization of pool "{top}" nodes (lower is worse)',
                window,
                util,
                p.stall_utilization,
            )
        )
        wait, port_link = self._waits(signals, top)
        if port_link is not None:
            node, device, port = port_link.key.split("/")
            sel = f'{{node="{node}",device="{device}",port="{port}"}}'
            query = f"port:ibpool_infiniband_congestion:ratio_rate5m{sel}"
            items.append(Evidence(query, window, wait, p.port_wait_threshold))
        return tuple(items)

    def _proposal(
        self, signals: Signals, kind: str, changes: list[Change], evidence: tuple[Evidence, ...], effect: str
    ) -> Proposal:
        created = datetime.fromtimestamp(signals.taken_at, UTC).replace(microsecond=0)
        return Proposal(
            kind=kind,  # type: ignore[arg-type]
            changes=tuple(changes),
            evidence=evidence,
            expected_effect=effect,
            created_at=created,
            expires_at=created + timedelta(seconds=self.params.expires_seconds),
            policy=NAME,
        )

    def demand(self, signals: Signals, pool: str, capacity: float) -> float:
        """A pool's offered load on one link: the most any of its ports offers (sent / (1 - wait))."""
        best = 0.0
        for link in self._index(signals)[1].get(pool, []):
            if link.utilization is not None:
                wait = min(link.congestion or 0.0, 0.99)
                best = max(best, link.utilization * link.rate_bytes_per_second / (1 - wait))
        return min(best, capacity)

    def _for_link(
        self, signals: Signals, qos: QosSignals, link: LinkSignals, top: str, notes: list[str]
    ) -> Proposal | None:
        vl_top = qos.vl_of(top)
        lower = [x for x in link.pools if self.rank(x) < self.rank(top)]
        vls = {x: qos.vl_of(x) for x in lower}
        if vl_top is None or any(v is None for v in vls.values()):
            notes.append(f"{link.key}: a pool's SL is unknown")
            return None
        evidence = self._evidence(signals, link, top)
        if vl_top in vls.values():
            return self._port_group(signals, qos, top, evidence, notes)
        return self._weights(
            signals,
            qos,
            link,
            top,
            low_vls={v for v in vls.values() if v is not None},
            evidence=evidence,
            notes=notes,
        )

    def _port_group(
        self, signals: Signals, qos: QosSignals, pool: str, evidence: tuple[Evidence, ...], notes: list[str]
    ) -> Proposal | None:
        used = {qos.vl_of(x) for x in qos.pool_sl if x != pool}
        weights = effective_weights(qos)
        for sl, vl in enumerate(qos.sl2vl):
            if vl not in used and weights.get(vl, 0) > 0:
                change = Change(targets.port_group_sl(pool), str(qos.pool_sl[pool]), str(sl))
                effect = f"pool {pool} moves to SL {sl} (VL {vl}, weight {weights[vl]}): a share of its own"
                return self._proposal(signals, "set_port_group", [change], evidence, effect)
        notes.append(f"{pool}: no SL on a VL of its own with a weight")
        return None

    def _weights(
        self,
        signals: Signals,
        qos: QosSignals,
        link: LinkSignals,
        top: str,
        *,
        low_vls: set[int],
        evidence: tuple[Evidence, ...],
        notes: list[str],
    ) -> Proposal | None:
        p = self.params
        vl_top = qos.vl_of(top)
        assert vl_top is not None
        cap = self.usable(link)
        floors = self._floors(signals, qos, top, link)
        need = self.demand(signals, top, cap)
        weights = effective_weights(qos)
        demands = {vl_top: need, **dict.fromkeys(low_vls, INF)}
        before = self.predict(cap, demands, weights)
        target = (1 - p.target_tolerance) * need
        if need <= 0 or before[vl_top] >= target:
            notes.append(f"{link.key}: the weights already give {top} its demand")
            return None
        new = dict(weights)
        seen = {**demands, **dict.fromkeys(self._satisfied(link, low_vls), 0.0)}
        now = self.readings(cap, (demands, seen), weights, vl_top)
        w_top = weights.get(vl_top, 0)
        reach = max(p.max_step, self._whole(w_top) + 1 - w_top)  # or one more packet a turn
        for k in range(1, reach + 1):  # the least step that gives `top` its demand, else the largest
            step = self._step(weights, vl_top, low_vls, k, floors)
            if step is not None and self._gains(self.readings(cap, (demands, seen), step, vl_top), now):
                new = step
                if self.predict(cap, demands, new)[vl_top] >= target:
                    break
        if new == weights:
            notes.append(f"{link.key}: no weight step left within the bounds (min share {p.min_share})")
            return None
        changes = self._changes(qos, weights, new)
        if not changes:
            notes.append(f"{link.key}: the VLs to change have no entry in a non-empty table")
            return None
        after = self.predict(cap, demands, new)
        low_pools = sorted(x for x in link.pools if self.rank(x) < self.rank(top))
        effect = (
            f"on {link.desc} port {link.key.split('/')[-1]} ({cap / 1e9:.1f} GB/s sent, weighted max-min in "
            "whole packets a turn, lower pools "
            f"saturating): {top} (VL {vl_top}) share {before[vl_top] / cap:.3f} -> {after[vl_top] / cap:.3f} "
            f"(demand {need / cap:.3f}); "
            + ", ".join(
                f"{x} (VL {qos.vl_of(x)}) share {before[qos.vl_of(x) or 0] / cap:.3f} -> "
                f"{after[qos.vl_of(x) or 0] / cap:.3f}"
                for x in low_pools
            )
            + f"; every lower pool keeps >= {p.min_share:.2f} of every switch port it may cross"
        )
        return self._proposal(signals, "set_vl_weights", changes, evidence, effect)

    def per_turn(self, weights: Mapping[int, int]) -> dict[int, int]:
        """Weights as arbitration serves them: a VL with a weight sends at least one packet a turn, so a
        weight counts rounded up to whole `arbitration_unit`s (1 when the unit is 1)."""
        unit = max(1, self.params.arbitration_unit)
        return {vl: unit * math.ceil(w / unit) if w > 0 else 0 for vl, w in weights.items()}

    def predict(
        self, capacity: float, demands: Mapping[int, float], weights: Mapping[int, int]
    ) -> dict[int, float]:
        """Each VL's share by weighted max-min, the least of two readings of the weights: as written (byte
        exact arbitration) and in whole packets a turn (`per_turn`); the arbitration is not observed."""
        exact = weighted_fill(capacity, demands, weights)
        packets = weighted_fill(capacity, demands, self.per_turn(weights))
        return {vl: min(exact[vl], packets[vl]) for vl in demands}

    def readings(
        self,
        capacity: float,
        cases: tuple[Mapping[int, float], ...],
        weights: Mapping[int, int],
        vl: int,
    ) -> tuple[float, ...]:
        """`vl`'s share under each reading of the weights (byte exact, whole packets a turn) for each case
        of the other VLs' demands."""
        served = (weights, self.per_turn(weights))
        return tuple(weighted_fill(capacity, d, w)[vl] for d in cases for w in served)

    def _satisfied(self, link: LinkSignals, vls: set[int]) -> list[int]:
        """The VLs among `vls` the port shows not held back (their wait share read, below
        `port_wait_threshold`): they get what they ask now, no more than their share. A VL not read (a
        saturated counter, no per-VL counters) is not among them."""
        waits = link.vl_congestion
        return [vl for vl in sorted(vls) if vl in waits and waits[vl] < self.params.port_wait_threshold]

    @staticmethod
    def _gains(after: tuple[float, ...], before: tuple[float, ...]) -> bool:
        """At least 1% more under one reading and no more than 1% less under any (the arbitration is not
        observed, nor what a VL that does not wait would take: a change must help whichever holds)."""
        pairs = list(zip(after, before, strict=True))
        return all(a >= b * 0.99 for a, b in pairs) and any(a >= b * 1.01 for a, b in pairs)

    def usable(self, link: LinkSignals) -> float:
        """What a congested link actually sends (bytes/s): its measured utilization when it waits (credit
        stalls keep a congested link below its rate), else its rate."""
        rate = link.rate_bytes_per_second
        if link.utilization is not None and (link.congestion or 0.0) >= self.params.port_wait_threshold:
            return max(0.5 * rate, min(rate, link.utilization * rate))
        return rate

    def _floors(
        self, signals: Signals, qos: QosSignals, top: str, link: LinkSignals
    ) -> list[dict[int, float]]:
        """Per switch port that lower pools may cross (one entry per distinct mix of VLs): the share of
        the port each VL there must keep, `min_share` of the port's rate for every lower pool it carries
        (a VL of two keeps two), against what `link` (the congested port acted on) measurably sends: its
        credit-stall loss is taken as the fabric's (a port that waits on back-pressure from further on
        sends less without being full, so its own throughput would overstate the loss). 0 for the VLs of
        `top` and of pools as high. The table is fabric-wide, so every such port counts."""
        p = self.params
        scale = link.rate_bytes_per_second / self.usable(link)
        mixes: set[tuple[tuple[int, int], ...]] = set()
        for port in signals.links.values():
            if port.kind != "fabric" or not port.pools:
                continue
            count: dict[int, int] = {}
            for pool in port.pools:
                vl = qos.vl_of(pool)
                if vl is not None:
                    count[vl] = count.get(vl, 0) + (1 if self.rank(pool) < self.rank(top) else 0)
            if len(count) >= 2 and any(count.values()):
                mixes.add(tuple(sorted(count.items())))
        share = p.min_share * p.min_share_margin * scale
        return [{vl: min(0.45, share * n) for vl, n in mix} for mix in sorted(mixes)]

    def _floor_ok(self, new: Mapping[int, int], floors: list[dict[int, float]]) -> bool:
        """Whether every port's floors hold under both readings of the weights (see `predict`)."""
        for served in (dict(new), self.per_turn(new)):
            for floor in floors:
                total = sum(served.get(vl, 0) for vl in floor)
                if any(share > 0 and served.get(vl, 0) < share * total - 1e-9 for vl, share in floor.items()):
                    return False
        return True

    def _least(self, new: Mapping[int, int], vl: int, floors: list[dict[int, float]]) -> int:
        """The least weight of `vl` that keeps its floor on every port, the others' weights as in `new`,
        under both readings: byte exact (w >= f x total) and in whole packets a turn."""
        unit = max(1, self.params.arbitration_unit)
        packets = self.per_turn(new)
        least = 1
        for floor in floors:
            share = floor.get(vl, 0.0)
            if share <= 0:
                continue
            others = sum(new.get(u, 0) for u in floor if u != vl)
            least = max(least, math.ceil(share * others / (1 - share) - 1e-9))
            turns = math.ceil(
                share * sum(packets.get(u, 0) for u in floor if u != vl) / (1 - share) / unit - 1e-9
            )
            least = max(least, (max(1, turns) - 1) * unit + 1)
        return least

    def _step(
        self, weights: Mapping[int, int], up: int, downs: set[int], k: int, floors: list[dict[int, float]]
    ) -> dict[int, int] | None:
        """Raise `up` by k and lower each of `downs` by up to k, to the least weights that keep each lower
        pool's floor on every port (`_floors`) under both readings of the weights; a VL may get weight
        back up to a whole packet more than it had (a cut below one packet a turn buys nothing where
        arbitration is packet-granular, while the raise does). None when the floors cannot be kept."""
        new = dict(weights)
        new[up] = min(targets.MAX_WEIGHT, weights.get(up, 0) + k)
        for vl in downs:
            if weights.get(vl, 0) > 0:
                new[vl] = max(1, weights[vl] - k)
        bounded = sorted({vl for floor in floors for vl, share in floor.items() if share > 0})
        for _ in range(32):  # raising one VL raises the others' totals: repeat until none moves
            moved = False
            for vl in bounded:
                least = self._least(new, vl, floors)
                if least > new.get(vl, 0):
                    if least > max(
                        weights.get(vl, 0), min(targets.MAX_WEIGHT, self._whole(weights.get(vl, 0)))
                    ):
                        return None
                    new[vl], moved = least, True
            if not moved:
                break
        return new if self._floor_ok(new, floors) else None

    def _whole(self, weight: int) -> int:
        """The least whole number of `arbitration_unit`s at or above `weight` (one packet at least)."""
        unit = max(1, self.params.arbitration_unit)
        return unit * max(1, math.ceil(weight / unit))

    @staticmethod
    def _changes(qos: QosSignals, old: Mapping[int, int], new: Mapping[int, int]) -> list[Change]:
        """Table edits: each VL's delta goes to its `vlarb_low` entry, else its `vlarb_high` entry."""
        high = dict(targets.parse_vlarb(qos.vlarb_high)) if qos.vlarb_high else {}
        low = dict(targets.parse_vlarb(qos.vlarb_low)) if qos.vlarb_low else {}
        high2, low2 = dict(high), dict(low)
        for vl in sorted(set(new) | set(old)):
            delta = new.get(vl, 0) - old.get(vl, 0)
            if delta == 0:
                continue
            table = low2 if vl in low2 or vl not in high2 else high2
            table[vl] = max(0, min(targets.MAX_WEIGHT, table.get(vl, 0) + delta))
        changes = []
        for name, before, after, text in (
            (targets.VLARB_HIGH, high, high2, qos.vlarb_high),
            (targets.VLARB_LOW, low, low2, qos.vlarb_low),
        ):
            if after != before:
                if not text:
                    return []
                order = [vl for vl, _ in targets.parse_vlarb(text)]
                pairs = [(vl, after[vl]) for vl in order] + [
                    (vl, w) for vl, w in sorted(after.items()) if vl not in order
                ]
                changes.append(
                    Change(name, targets.format_vlarb(targets.parse_vlarb(text)), targets.format_vlarb(pairs))
                )
        return changes

    # --- surges -------------------------------------------------------------------------------------

    def _surges(
        self,
        signals: Signals,
        state: QuotaState,
        first: dict[str, float],
        last: dict[str, float],
        notes: list[str],
    ) -> tuple[list[Proposal], dict[str, float]]:
        """Pools whose GPU load surged while their ports wait on a shared congested link: raise the class."""
        p, qos, now = self.params, signals.qos, signals.taken_at
        assert qos is not None
        baseline = dict(state.baseline_util)
        out: list[Proposal] = []
        for pool in sorted(signals.pools):
            nodes = self._pool_nodes(signals, pool)
            rose = [
                n for n in nodes
                if (u := signals.nodes[n].gpu_utilization) is not None and n in baseline
                and u - baseline[n] >= p.surge_delta
            ]  # fmt: skip
            key = f"surge:{pool}"
            if not nodes or len(rose) < p.surge_fraction * len(nodes):
                first.pop(key, None)
                for n in nodes:
                    util = signals.nodes[n].gpu_utilization
                    if util is not None:
                        baseline[n] = util
                continue
            link = self._shared_link(signals, pool)
            if link is None or self._waits(signals, pool)[0] < p.port_wait_threshold:
                continue
            top = max(link.pools, key=lambda x: (self.rank(x), x))
            if self.rank(top) <= self.rank(pool) or top not in qos.pool_sl or pool not in qos.pool_sl:
                continue
            first.setdefault(key, now)
            if (
                now - first[key] < p.persistence_seconds
                or now - last.get(f"port_group.{pool}", -INF) < p.cooldown_seconds
            ):
                continue
            if qos.pool_sl[pool] == qos.pool_sl[top]:
                continue
            change = Change(targets.port_group_sl(pool), str(qos.pool_sl[pool]), str(qos.pool_sl[top]))
            window = _window(signals.window_seconds)
            evidence = (
                Evidence(
                    f'nodes of pool "{pool}" whose GPU utilization rose by >= {p.surge_delta}',
                    window,
                    len(rose),
                    p.surge_fraction * len(nodes),
                ),
                *self._evidence(signals, link, pool)[:1],
            )
            effect = (
                f"pool {pool} takes the class of {top} (SL {qos.pool_sl[top]}) "
                f"while its GPU load surges on {link.desc}"
            )
            out.append(self._proposal(signals, "set_port_group", [change], evidence, effect))
            last[f"port_group.{pool}"] = now
            notes.append(f"{pool}: GPU load surged on {len(rose)} of {len(nodes)} nodes")
        return out, baseline

    def _shared_link(self, signals: Signals, pool: str) -> LinkSignals | None:
        shared = [
            x for x in signals.links.values() if pool in x.pools and len(x.pools) > 1 and self._congested(x)
        ]
        return max(shared, key=lambda x: (x.utilization or 0.0, x.key)) if shared else None


def with_priorities(params: QuotaParams, priorities: Mapping[str, int]) -> QuotaParams:
    """The params with another pool ranking."""
    return replace(params, priorities=dict(priorities))
