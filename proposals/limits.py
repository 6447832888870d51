"""What a proposal would change, measured: nodes moved, share of a pool, VL weight steps; and the limits.

Pure functions of proposals, shared by the approval rules and the scheduler hooks (which check again
before applying).
"""

from __future__ import annotations

from collections.abc import Iterable

from proposals import targets
from proposals.approval_config import BlastRadius
from proposals.model import Change, Proposal

NodeSet = frozenset[str]


def _members(change: Change) -> tuple[NodeSet, NodeSet] | None:
    """(before, after) node names or port GUIDs of a membership change; None for other targets."""
    family = targets.parse_target(change.target).family
    if family == targets.SLURM_NODES:
        return frozenset(targets.parse_node_list(change.before)), frozenset(
            targets.parse_node_list(change.after)
        )
    if family == targets.PARTITION_MEMBERS:
        return (
            frozenset(map(targets.member_guid, targets.parse_members(change.before))),
            frozenset(map(targets.member_guid, targets.parse_members(change.after))),
        )
    return None


def moved_nodes(proposal: Proposal) -> NodeSet:
    """Nodes that leave or join a pool: from the Slurm node lists, else from the OpenSM partitions."""
    by_family: dict[str, set[str]] = {targets.SLURM_NODES: set(), targets.PARTITION_MEMBERS: set()}
    for change in proposal.changes:
        members = _members(change)
        if members is not None:
            by_family[targets.parse_target(change.target).family] |= members[0] ^ members[1]
    return frozenset(by_family[targets.SLURM_NODES] or by_family[targets.PARTITION_MEMBERS])


def pool_shares_removed(proposal: Proposal) -> dict[str, tuple[int, int]]:
    """Per membership target: (members removed, members before)."""
    shares: dict[str, tuple[int, int]] = {}
    for change in proposal.changes:
        members = _members(change)
        if members is not None:
            shares[change.target] = (len(members[0] - members[1]), len(members[0]))
    return shares


def weight_steps(proposal: Proposal) -> list[tuple[str, int, int, int]]:
    """Every VL weight that changes: (target, vl, before, after); a VL not listed has weight 0."""
    steps: list[tuple[str, int, int, int]] = []
    for change in proposal.changes:
        if targets.parse_target(change.target).family in targets.VLARB_FAMILIES:
            before, after = targets.vl_weights(change.before), targets.vl_weights(change.after)
            for vl in sorted(set(before) | set(after)):
                old, new = before.get(vl, 0), after.get(vl, 0)
                if old != new:
                    steps.append((change.target, vl, old, new))
    return steps


def blast_radius_problems(
    proposal: Proposal, limits: BlastRadius, recently_moved: Iterable[Proposal] = ()
) -> list[str]:
    """Why the plan is unsafe under `limits` (empty when it is not).

    `recently_moved` are the other node moves approved within the last hour (they count towards
    `max_nodes_moved_per_hour`).
    """
    problems: list[str] = []
    moved = len(moved_nodes(proposal))
    if moved:
        earlier = sum(len(moved_nodes(other)) for other in recently_moved)
        if moved + earlier > limits.max_nodes_moved_per_hour:
            problems.append(
                f"moves {moved} node(s) and {earlier} were moved by other approvals in the last hour: "
                f"more than max_nodes_moved_per_hour {limits.max_nodes_moved_per_hour}"
            )
    for target, (removed, size) in pool_shares_removed(proposal).items():
        if size and removed / size > limits.max_pool_share_moved:
            problems.append(
                f"{target}: removes {removed} of {size} ({removed / size:.0%}): more than "
                f"max_pool_share_moved {limits.max_pool_share_moved:.0%}"
            )
    for target, vl, old, new in weight_steps(proposal):
        if abs(new - old) > limits.max_weight_change_per_step:
            problems.append(
                f"{target}: VL {vl} weight {old} -> {new} changes by {abs(new - old)}: more than "
                f"max_weight_change_per_step {limits.max_weight_change_per_step}"
            )
    return problems
