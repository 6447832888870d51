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
   - otherwise raise H's VL weight and lower the others' in steps of at most `max_step`, never below a
     `min_share` of the link for any VL with traffic, by the least that the weighted max-min prediction
     says gives H its demand (offered load of its ports); nothing when the weights already do. The
     prediction takes the worse of two readings of the weights (byte-exact, and whole packets a turn:
     `arbitration_unit`) and a congested link's capacity as what it measurably sends (credit stalls);
     the minimum share is kept under both readings, against that capacity, for every lower pool (a VL
     that carries two of them keeps two shares), with `min_share_margin` to spare (head-of-line blocking
     takes from a lower VL some of what its weight gives it).
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
    min_share_margin: float = 1.0  # weights keep this much more than min_share (1: exactly min_share)
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
        base = p.min_share * p.min_share_margin * link.rate_bytes_per_second / cap
        sharing = {vl: sum(1 for x in link.pools if qos.vl_of(x) == vl) for vl in low_vls}
        floor = {vl: min(0.45, base * max(1, n)) for vl, n in sharing.items()}  # every pool, not every VL
        need = self.demand(signals, top, cap)
        weights = effective_weights(qos)
        demands = {vl_top: need, **dict.fromkeys(low_vls, INF)}
        before = self.predict(cap, demands, weights)
        if need <= 0 or before[vl_top] >= (1 - p.target_tolerance) * need:
            notes.append(f"{link.key}: the weights already give {top} its demand")
            return None
        new = dict(weights)
        for k in range(1, p.max_step + 1):
            new = self._step(weights, vl_top, low_vls, k, floor)
            if self.predict(cap, demands, new)[vl_top] >= (1 - p.target_tolerance) * need:
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
            + f"; every VL keeps >= {p.min_share:.2f}"
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

    def usable(self, link: LinkSignals) -> float:
        """What a congested link actually sends (bytes/s): its measured utilization when it waits (credit
        stalls keep a congested link below its rate), else its rate."""
        rate = link.rate_bytes_per_second
        if link.utilization is not None and (link.congestion or 0.0) >= self.params.port_wait_threshold:
            return max(0.5 * rate, min(rate, link.utilization * rate))
        return rate

    def _floor_ok(self, new: Mapping[int, int], up: int, downs: set[int], floor: Mapping[int, float]) -> bool:
        for served in (dict(new), self.per_turn(new)):  # both readings of the weights (see `predict`)
            total = sum(served.get(v, 0) for v in (up, *downs))
            if any(served.get(vl, 0) < floor[vl] * total for vl in downs if new.get(vl, 0) > 0):
                return False
        return True

    def _step(
        self, weights: Mapping[int, int], up: int, downs: set[int], k: int, floor: Mapping[int, float]
    ) -> dict[int, int]:
        """Raise `up` by k and lower each of `downs` by up to k, keeping each down VL's share of the link,
        as arbitration serves it, >= its `floor` (a down VL gives back weight, then `up` gives back its
        raise, until it does)."""
        new = dict(weights)
        new[up] = min(targets.MAX_WEIGHT, weights.get(up, 0) + k)
        for vl in sorted(downs):
            if weights.get(vl, 0) > 0:
                new[vl] = max(1, weights[vl] - k)
        for vl in sorted(downs):
            while new.get(vl, 0) < weights.get(vl, 0) and not self._floor_ok(new, up, downs, floor):
                new[vl] += 1
        while new[up] > weights.get(up, 0) and not self._floor_ok(new, up, downs, floor):
            new[up] -= 1
        return new

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
