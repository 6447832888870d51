"""One recommendation cycle: signals -> rebalance + quota policies -> proposals -> store -> auto-approval.

`Recommender.evaluate(signals)` is the pure part (policies only); `run_once()` fetches, evaluates, submits
(a proposal equal in kind and changes to one still pending is not submitted again) and lets the approval
policy file decide. Hysteresis memory (quota state, per-pool history for the rebalance windows) lives in
the Recommender and, when `state_path` is given, in a JSON file beside the store so `--once` runs chain.
Loans, home partitions, cooldowns and the lend budget come from the `move_nodes` proposals in the store
(`signals/placement.py`), read once per cycle, so a restart keeps them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from proposals import targets
from proposals.approval import Decision, auto_approve_pending
from proposals.approval_config import ApprovalConfig
from proposals.model import Change, Evidence, Proposal
from proposals.states import PENDING
from proposals.store import Store
from recommender.policies.quota import QuotaPolicy, QuotaState
from recommender.policies.rebalance import LEND, RECLAIM, TAKEBACK, Move, RebalancePolicy
from recommender.policies.rebalance import Evidence as PolicyEvidence
from recommender.signals.assemble import IDLE, OFFLINE
from recommender.signals.history import PoolHistory, cluster_view
from recommender.signals.model import POOLS, Missing, Signals
from recommender.signals.placement import Placement, StoredMove, place, read_moves
from recommender.signals.source import SignalSource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submitted:
    """A proposal this cycle made, and whether the store took it as new."""

    id: str
    created: bool
    proposal: Proposal


@dataclass(frozen=True)
class CycleResult:
    """What one cycle did."""

    ok: bool
    started_at: float
    duration_seconds: float
    source: str
    missing: tuple[Missing, ...] = ()
    submitted: tuple[Submitted, ...] = ()
    skipped_duplicates: int = 0
    decisions: tuple[Decision, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "ok": self.ok,
            "started_at": self.started_at,
            "duration_seconds": self.duration_seconds,
            "source": self.source,
            "missing": [{"signal": m.signal, "reason": m.reason} for m in self.missing],
            "proposals": [{"id": s.id, "new": s.created, **s.proposal.to_dict()} for s in self.submitted],
            "skipped_duplicates": self.skipped_duplicates,
            "auto_approval": [asdict(d) for d in self.decisions],
            "notes": list(self.notes),
            "error": self.error,
        }


@dataclass
class Evaluation:
    """The policies' output for one snapshot."""

    proposals: list[Proposal] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Recommender:
    """Runs cycles against one source and one store."""

    def __init__(
        self,
        source: SignalSource,
        store: Store,
        *,
        quota: QuotaPolicy | None = None,
        rebalance: RebalancePolicy | None = None,
        approval: ApprovalConfig | None = None,
        gpus_per_node: int = 8,
        state_path: Path | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.source = source
        self.store = store
        self.quota = quota or QuotaPolicy()
        self.rebalance = rebalance or RebalancePolicy()
        self.approval = approval
        self.gpus_per_node = gpus_per_node
        self.state_path = state_path
        self.progress = progress
        self.quota_state = QuotaState()
        self.history = PoolHistory()
        self._load_state()

    def evaluate(self, signals: Signals, stored: Sequence[StoredMove] | None = None) -> Evaluation:
        """Both policies on one snapshot (no I/O); updates the hysteresis memory.

        `stored`: the store's `move_nodes` proposals (`read_moves`); None: no loans known, and the
        cooldowns and lend budget only see the lends this process proposed.
        """
        out = Evaluation()
        lacking = signals.lacking((POOLS,))
        if lacking:
            out.missing += lacking
        else:
            self.history.record(signals)
            placement = None
            if stored is not None:
                members = {n.name: n.pools for n in signals.nodes.values()}
                placement = place(stored, signals.taken_at, self.rebalance.name, members)
            view = cluster_view(signals, self.history, self.gpus_per_node, self.rebalance, placement)
            moves = self.rebalance.propose(view)
            out.proposals += moves_to_proposals(signals, moves, self.rebalance, placement=placement)
            for move in moves:
                if move.kind == LEND:
                    self.history.lent(move.from_pool, move.to_pool, signals.taken_at, move.nodes)
        decision = self.quota.propose(signals, self.quota_state)
        self.quota_state = decision.state
        out.proposals += decision.proposals
        out.missing += [m for m in decision.missing if m not in out.missing]
        out.notes += decision.notes
        return out

    def run_once(self) -> CycleResult:
        """Fetch, evaluate, submit, auto-approve; never raises for missing data."""
        started, clock = time.time(), time.perf_counter()
        self._say(f"fetching signals from {self.source.name}")
        signals = self.source.fetch()
        self._say(f"signals: {len(signals.pools)} pools, {len(signals.nodes)} nodes; reading stored moves")
        known = read_moves(self.store)
        watched = self.history.watched_min(signals.taken_at)
        self._say(f"planning over {len(known)} stored node move(s) and {watched:.0f} min of history")
        found = self.evaluate(signals, known)
        self._say(f"policies proposed {len(found.proposals)} change(s); submitting")
        for pid in self.store.expire_due():  # an expired proposal neither blocks its successor nor waits
            log.info("proposal %s expired", pid[:12])
        pending = {proposal_shape(s.proposal) for s in self.store.list_proposals(PENDING)}
        submitted: list[Submitted] = []
        skipped = 0
        for proposal in found.proposals:
            if proposal_shape(proposal) in pending:
                skipped += 1
                continue
            stored, created = self.store.submit(proposal)
            submitted.append(Submitted(stored.id, created, proposal))
            log.info("proposed %s %s: %s", proposal.kind, stored.id[:12], proposal.expected_effect)
        decisions: list[Decision] = []
        if self.approval is not None and self.approval.name is not None:
            decisions = auto_approve_pending(self.store, self.approval)
        for item in found.missing:
            log.warning("no proposal from the policies that need %s", item)
        self._save_state()
        return CycleResult(
            ok=True,
            started_at=started,
            duration_seconds=time.perf_counter() - clock,
            source=signals.source,
            missing=tuple(found.missing),
            submitted=tuple(submitted),
            skipped_duplicates=skipped,
            decisions=tuple(decisions),
            notes=tuple(found.notes),
        )

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    # --- hysteresis memory on disk ------------------------------------------------------------------

    def _load_state(self) -> None:
        if self.state_path is None or not self.state_path.exists():
            return
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            self.quota_state = QuotaState(
                dict(data["quota"]["first_seen"]),
                dict(data["quota"]["last_proposed"]),
                dict(data["quota"]["baseline_util"]),
            )
            self.history = PoolHistory.from_dict(data["history"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring recommender state %s: %s", self.state_path, exc)

    def _save_state(self) -> None:
        if self.state_path is None:
            return
        data = {"quota": asdict(self.quota_state), "history": self.history.to_dict()}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        tmp.replace(self.state_path)


_DEMAND = 'sum(ibpool_pool_allocated_gpus{{pool="POOL"}}) + pool:ibpool_pool_pending_gpus:sum{{pool="POOL"}}'
_QUERIES = {
    "taker_use_rate_gpus": (
        "avg_over_time(clamp("
        + _DEMAND.replace("POOL", "{to}")
        + ' - ibpool_pool_capacity_gpus{{pool="{to}"}}'
        ", 0, 8)[{w}:1m])  (the trailing window closest to the expected loan of {w}, blended with the last "
        "hour's by taker_forecast_recent_weight, or the time-of-day profile where it forecasts better)"
    ),
    "taker_forecast_recent_weight": (
        'weight of the last hour in the use forecast of "{to}": the share of the forecast errors of the '
        "window at the loan's scale when each forecast the pool's next day, over {w} (0: none scored yet)"
    ),
    "donor_idle_min": (
        'minutes the node lent is expected to stay idle at "{frm}" (persistence: since its demand last '
        "needed it; or until its time-of-day profile expects it back), looked back over {w}"
    ),
    "donor_rises": (
        'times the demand of "{frm}" rose above its capacity after the loan (a drain\'s wait each), over the '
        "window of the loan's scale; threshold: the rises its wait allowance (1 - wait_quantile of its "
        "demand minutes) absorbs"
    ),
    "expected_value_gpu_minutes": (
        'planner value: GPU-minutes the node serves "{to}" minus the displacement risked at "{frm}" '
        "over the expected loan of {w}"
    ),
    "move_budget_tokens": (
        "move budget tokens left after this move (paced moves per pool-day, at most one day's worth)"
    ),
    "donor_takeback_wait_min": (
        "minutes \"{frm}\" is expected to wait when it takes the node back: a drain's, or a reclaim's when "
        "only requeueing the holder's jobs keeps its wait target (threshold: a drain's)"
    ),
    "reclaim_requeued_gpus": (
        'GPUs of "{frm}" expected running on the node(s) reclaimed: their jobs are requeued (scontrol '
        "requeue) and lose the work since their last checkpoint (threshold: the GPUs the nodes hold)"
    ),
    "reclaim_lost_gpu_minutes": (
        'GPU-minutes of work "{frm}" is expected to lose to the requeue, against the GPU-minutes of waiting '
        'a drain would cost "{home}" (threshold; a reclaim is chosen below it, or when the wait allowance '
        "of the owner cannot absorb a drain)"
    ),
    "owner_shortfall_gpus": _DEMAND.replace("POOL", "{home}")
    + ' - ibpool_pool_capacity_gpus{{pool="{home}"}}',
}


def _pick(
    signals: Signals, move: Move, pools: tuple[list[str], list[str]], where: Placement, used: set[str]
) -> list[str]:
    """Nodes of `move.home_pool` in the donor (not on their way already, not picked by another move): idle
    ones, last in natural order; a take-back then recalls busy ones too (the hooks drain them)."""
    donor, taker = pools
    ok = [
        n
        for n in donor
        if n not in taker
        and n not in used
        and n not in where.transit
        and where.home_of(n, move.from_pool) == move.home_pool
    ]
    idle = targets.sorted_nodes(n for n in ok if signals.nodes[n].state == IDLE)
    busy: list[str] = []
    if move.kind in (TAKEBACK, RECLAIM):
        online = (n for n in ok if signals.nodes[n].state not in OFFLINE | {IDLE})
        busy = targets.sorted_nodes(online)
    return (busy + idle)[-move.nodes :] if move.nodes else []


def moves_to_proposals(
    signals: Signals,
    moves: Sequence[Move],
    policy: RebalancePolicy,
    expires_seconds: float = 3600.0,
    *,
    placement: Placement | None = None,
) -> list[Proposal]:
    """The moves as `move_nodes` proposals: nodes of each move's home pool (see `_pick`) change pool.

    Moves that touch a common pool go into one proposal (every partition they touch, once, with its list
    before and after all of them): two proposals that both rewrite one partition would each carry the same
    `before`, and applying one would make the other stale.
    """
    members: dict[str, list[str]] = {p: [] for p in signals.pools}
    for node in signals.nodes.values():
        for pool in node.pools:
            members.setdefault(pool, []).append(node.name)
    where = placement or Placement()
    created = datetime.fromtimestamp(signals.taken_at, UTC).replace(microsecond=0)
    running = {n.name for n in signals.nodes.values() if n.state not in OFFLINE | {IDLE}}
    picked: list[tuple[Move, list[str]]] = []
    used: set[str] = set()
    for move in moves:
        donor, taker = members.get(move.from_pool, []), members.get(move.to_pool, [])
        chosen = _pick(signals, move, (donor, taker), where, used)
        if len(chosen) < move.nodes:
            continue  # not enough movable nodes now: no guess
        used.update(chosen)
        picked.append((move, chosen))
    return [
        _group_proposal(group, members, policy, created, expires_seconds, running=running)
        for group in _connected(picked)
    ]


def _connected(picked: list[tuple[Move, list[str]]]) -> list[list[tuple[Move, list[str]]]]:
    """The moves grouped so that moves sharing a pool (directly or through others) are together, in order."""
    groups: list[tuple[set[str], list[tuple[Move, list[str]]]]] = []
    for item in picked:
        pools = {item[0].from_pool, item[0].to_pool}
        joined = [g for g in groups if g[0] & pools]
        merged: tuple[set[str], list[tuple[Move, list[str]]]] = (set(pools), [])
        for g in joined:
            merged[0].update(g[0])
            merged[1].extend(g[1])
            groups.remove(g)
        merged[1].append(item)
        merged[1].sort(key=picked.index)
        groups.append(merged)
    groups.sort(key=lambda g: picked.index(g[1][0]))
    return [g[1] for g in groups]


def _group_proposal(
    group: list[tuple[Move, list[str]]],
    members: dict[str, list[str]],
    policy: RebalancePolicy,
    created: datetime,
    expires_seconds: float,
    *,
    running: set[str],
) -> Proposal:
    """One `move_nodes` proposal for a group of moves; a reclaim's nodes are its `reclaim` (the hooks
    requeue their jobs at once) and its effect names those the signals show running."""
    order: list[str] = []
    after: dict[str, set[str]] = {}
    for move, chosen in group:
        for pool in (move.from_pool, move.to_pool):
            if pool not in after:
                order.append(pool)
                after[pool] = set(members.get(pool, []))
        after[move.from_pool] -= set(chosen)
        after[move.to_pool] |= set(chosen)
    changes = tuple(
        Change(
            targets.slurm_partition_nodes(pool),
            targets.format_node_list(members.get(pool, [])),
            targets.format_node_list(after[pool]),
        )
        for pool in order
    )
    evidence = tuple(_evidence(move, e) for move, _ in group for e in move.evidence)
    effect = "; ".join(
        f"{move.kind}: {move.nodes} node(s) ({', '.join(chosen)}) of {move.home_pool} "
        f"from {move.from_pool} to {move.to_pool}: {move.reason}" + _requeues(move, chosen, running)
        for move, chosen in group
    )
    return Proposal(
        kind="move_nodes",
        changes=changes,
        evidence=evidence,
        expected_effect=effect,
        created_at=created,
        expires_at=created + timedelta(seconds=expires_seconds),
        policy=policy.name,
        reclaim=targets.format_node_list(n for move, chosen in group if move.kind == RECLAIM for n in chosen),
    )


def _requeues(move: Move, chosen: Sequence[str], running: set[str]) -> str:
    """For a reclaim, the nodes whose jobs the hooks are to requeue (with `slurm.reclaims: allow`)."""
    if move.kind != RECLAIM:
        return ""
    busy = [n for n in chosen if n in running]
    return f" [requeue jobs on: {', '.join(busy)}]" if busy else " [requeue jobs on: none running now]"


def _evidence(move: Move, e: PolicyEvidence) -> Evidence:
    """A planner's evidence as the proposal's: the query it stands for, the window, value and threshold."""
    window = f"{max(1, round(e.window_min))}m"
    query = _QUERIES.get(e.signal, e.signal).format(
        to=move.to_pool, frm=move.from_pool, home=move.home_pool, w=window
    )
    return Evidence(query, window, e.value, e.threshold)


def proposal_shape(proposal: Proposal) -> tuple[str, tuple[tuple[str, str, str], ...], str]:
    """What makes a new proposal the same as a pending one (not submitted again): its kind, its changes
    and the nodes it takes back by reclaim (a reclaim is not the drain of the same nodes)."""
    return proposal.kind, tuple((c.target, c.before, c.after) for c in proposal.changes), proposal.reclaim


def state_path_for(db: Path) -> Path:
    """Where the hysteresis memory of a store's recommender lives."""
    return db.with_name(db.name + ".recommender-state.json")


__all__: Sequence[str] = ("CycleResult", "Evaluation", "Recommender", "Submitted", "state_path_for")
