"""Where nodes are: home pools, loans and recent lends, read from `move_nodes` proposals in the store.

An applied `move_nodes` proposal moved nodes between Slurm partitions (the node lists of its
`slurm.partition.<pool>.nodes` changes: a node that left one list and joined another moved). Following a
node's applied moves in the order they were applied gives its home (the pool it left in its first move
that still stands) and where it is now; a node back home is no longer on loan. An approved or applying move
is on its way (`in_transit`). A move away from a node's home, or onward, is a lend; lends by the rebalance
policy that are pending, approved, applying or applied feed the cooldowns and the lend budget, so a restart
forgets none of them, and a pending one's nodes are `promised` to its taker (so a pool still waiting for
an operator's approval is not offered them again); the policy's moves home (take-backs) start the owner's
cooldown and count against the move budget. Rejected, expired (or past `expires_at`), failed and rolled
back moves count nowhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from proposals.records import StoredProposal
from proposals.states import APPLIED, APPLYING, APPROVED, PENDING
from proposals.store import Store
from proposals.targets import SLURM_NODES, parse_node_list, parse_target
from recommender.policies.rebalance import Loan

MOVE_NODES = "move_nodes"
COUNTED = (PENDING, APPROVED, APPLYING, APPLIED)
IN_TRANSIT = (APPROVED, APPLYING)


@dataclass(frozen=True)
class StoredMove:
    """One `move_nodes` proposal as (node, from pool, to pool) triples; times in Unix seconds."""

    id: str
    state: str
    policy: str
    created_at: float
    expires_at: float
    settled_at: float  # when it entered its state (orders the applied moves)
    nodes: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Lend:
    """`nodes` nodes lent from `donor` to `taker` by a proposal created at `at` (Unix seconds)."""

    at: float
    donor: str
    taker: str
    nodes: int


@dataclass
class Placement:
    """Nodes away from home (applied moves), nodes on their way, and the rebalance policy's lends."""

    home: dict[str, str] = field(default_factory=dict)  # node -> home pool, nodes away only
    at: dict[str, str] = field(default_factory=dict)  # node -> pool holding it, nodes away only
    transit: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # node -> (home, from, to)
    lends: list[Lend] = field(default_factory=list)
    takebacks: list[tuple[float, str, int]] = field(default_factory=list)  # (created at, owner, nodes)
    promised: Counter[str] = field(default_factory=Counter)  # pool -> nodes pending lends would bring
    # the policy's moves that count (pending to applied): (created at, from, to, home, nodes)
    records: list[tuple[float, str, str, str, int]] = field(default_factory=list)

    def loans(self) -> tuple[Loan, ...]:
        """Loans aggregated per (home, holder): held nodes, then nodes on their way."""
        held = Counter((self.home[n], self.at[n]) for n in self.at if n not in self.transit)
        moving = Counter((home, to) for home, _, to in self.transit.values())
        out = [Loan(home, holder, k) for (home, holder), k in sorted(held.items())]
        out += [Loan(home, to, k, in_transit=True) for (home, to), k in sorted(moving.items())]
        return tuple(out)

    def borrowed(self) -> Counter[str]:
        """Nodes each pool holds on loan (applied moves)."""
        return Counter(self.at.values())

    def lent(self) -> Counter[str]:
        """Own nodes of each pool that are away (applied moves)."""
        return Counter(self.home.values())

    def home_of(self, node: str, pool: str) -> str:
        """The home of a node now in `pool` (the pool itself unless the node is on loan there)."""
        return self.home[node] if self.at.get(node) == pool else pool


def stored_move(stored: StoredProposal) -> StoredMove | None:
    """The node moves of a `move_nodes` proposal (None for another kind or when no node moved)."""
    proposal = stored.proposal
    if proposal.kind != MOVE_NODES:
        return None
    left: dict[str, list[str]] = {}
    joined: dict[str, list[str]] = {}
    for change in proposal.changes:
        target = parse_target(change.target)
        if target.family != SLURM_NODES or target.pool is None:
            continue
        before, after = set(parse_node_list(change.before)), set(parse_node_list(change.after))
        for node in before - after:
            left.setdefault(node, []).append(target.pool)
        for node in after - before:
            joined.setdefault(node, []).append(target.pool)
    moves = tuple(
        (node, left[node][0], joined[node][0])
        for node in sorted(left)
        if len(left[node]) == 1 and len(joined.get(node, ())) == 1
    )
    if not moves:
        return None
    return StoredMove(
        id=stored.id,
        state=stored.state,
        policy=proposal.policy,
        created_at=proposal.created_at.timestamp(),
        expires_at=proposal.expires_at.timestamp(),
        settled_at=stored.updated_at.timestamp(),
        nodes=moves,
    )


def read_moves(store: Store) -> list[StoredMove]:
    """Every `move_nodes` proposal that counts (pending to applied), as node moves."""
    found = (stored_move(s) for s in store.list_kind(MOVE_NODES, COUNTED))
    return [m for m in found if m is not None]


def place(
    moves: Iterable[StoredMove],
    now: float,
    policy: str,
    members: Mapping[str, Sequence[str]] | None = None,
) -> Placement:
    """Follow the applied moves in order, then the ones on their way; collect `policy`'s lends.

    `members` (node -> pools it is in now, from the signals) drops a loan the live system no longer shows
    (the node is not in the pool the store says holds it); nodes it does not list are taken as stored.
    """
    live = [m for m in moves if m.state in (APPLYING, APPLIED) or m.expires_at > now]
    out = Placement()
    applied = sorted((m for m in live if m.state == APPLIED), key=lambda m: (m.settled_at, m.id))
    for move in applied:
        homes = [(node, out.home.get(node, src), src, dst) for node, src, dst in move.nodes]
        for node, home, _, dst in homes:
            if dst == home:
                out.home.pop(node, None)
                out.at.pop(node, None)
            else:
                out.home[node], out.at[node] = home, dst
        if move.policy == policy:
            _count(out, move.created_at, homes)
    if members is not None:
        for node in [n for n, pool in out.at.items() if n in members and pool not in members[n]]:
            del out.home[node], out.at[node]
    for move in sorted((m for m in live if m.state != APPLIED), key=lambda m: (m.created_at, m.id)):
        homes = [(node, out.home.get(node, src), src, dst) for node, src, dst in move.nodes]
        if move.state in IN_TRANSIT:
            for node, home, src, dst in homes:
                out.transit[node] = (home, src, dst)
        elif move.policy == policy:  # pending: not moving yet, but the taker is not to be offered more
            out.promised.update(dst for _, home, _, dst in homes if dst != home)
        if move.policy == policy:
            _count(out, move.created_at, homes)
    out.lends.sort(key=lambda x: x.at)
    out.takebacks.sort()
    out.records.sort()
    return out


def _count(out: Placement, at: float, homes: Sequence[tuple[str, str, str, str]]) -> None:
    """One proposal's lends (per donor and taker: nodes moved away from home or onward) and take-backs
    (owners whose nodes came home, with how many)."""
    lent = Counter((src, dst) for _, home, src, dst in homes if dst != home)
    out.lends.extend(Lend(at, src, dst, k) for (src, dst), k in sorted(lent.items()))
    back = Counter(dst for _, home, _, dst in homes if dst == home)
    out.takebacks.extend((at, owner, k) for owner, k in sorted(back.items()))
    moved = Counter((src, dst, home) for _, home, src, dst in homes)
    out.records.extend((at, src, dst, home, k) for (src, dst, home), k in sorted(moved.items()))


__all__: Sequence[str] = ("Lend", "Placement", "StoredMove", "place", "read_moves", "stored_move")
