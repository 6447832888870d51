"""Approval rules: who may approve, what an approval policy may auto-approve, and the blast-radius limits.

Every decision goes through `Store.transition` with a guard, so the checks and the state change are one
transaction, and a refusal is recorded in the audit log (`refused`) with `who`: a person, or
`policy:<name>` for an approval policy file, and the `actor` the system vouched for.

Four eyes: a person's approval is refused when any of the approver's names (the declared `by` and the
principal of the real identity) is one of the proposer's (the declared proposer and its real identity);
the trust model is in docs/approvals.md. Auto-approval by a policy file is a policy decision: it is bound
by the policy's limits, not by who runs it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta

from foundation.identity import parse_actor
from proposals import limits, targets
from proposals.approval_config import DEFAULT_CONFIG, ApprovalConfig, AutoApprove, BlastRadius
from proposals.errors import ApprovalRefusedError, IllegalTransitionError, ProposalExpiredError
from proposals.model import Proposal
from proposals.records import StoredProposal
from proposals.states import APPLIED, APPLYING, APPROVED, FAILED, PENDING, REJECTED
from proposals.store import SYSTEM, Store

log = logging.getLogger(__name__)

_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
WINDOW = timedelta(hours=1)
COUNTED_STATES = frozenset({APPROVED, APPLYING, APPLIED, FAILED})
"""Moves that count towards the hourly limit: approved and not (yet) undone or refused."""


@dataclass(frozen=True)
class Decision:
    """What an approval policy decided about one proposal."""

    proposal_id: str
    approved: bool
    who: str
    reasons: tuple[str, ...] = ()


def check_person(name: str) -> None:
    """ValueError unless `name` can stand for a person (a policies' `policy:` names cannot)."""
    if not _PERSON.fullmatch(name) or name == SYSTEM:
        raise ValueError(
            f"{name!r} is not a person's name (letters, digits, '.', '_', '@', '+', '-'; "
            f"not {SYSTEM!r}, not policy:...)"
        )


def same_party(a: str, b: str) -> bool:
    """Whether two `who` names denote the same party (names are compared without case)."""
    return a.casefold() == b.casefold()


def party_names(who: str, actor: str) -> set[str]:
    """The names a party goes by: its declared `who` and its identity's principal (case folded)."""
    names = {who.casefold()}
    identity = parse_actor(actor)
    if identity is not None:
        names.add(identity.principal)
    return names


def four_eyes_problems(by: str, actor: str, stored: StoredProposal) -> list[str]:
    """Why `by` (really `actor`) may not approve `stored`: the approver must not be the proposer."""
    problems: list[str] = []
    if same_party(by, stored.proposer):
        problems.append(f"{by} proposed it; the approver must not be the proposer")
    shared = party_names(by, actor) & party_names(stored.proposer, stored.proposer_actor)
    if shared and not problems:
        problems.append(
            f"{by} [{actor}] and the proposer {stored.proposer} [{stored.proposer_actor}] are the same "
            f"person ({', '.join(sorted(shared))}); the approver must not be the proposer"
        )
    return problems


def recent_moves(store: Store, exclude: str) -> list[Proposal]:
    """Node moves approved within the last hour that still count, except proposal `exclude`."""
    since = store.now() - WINDOW
    return [
        stored.proposal
        for stored in store.approved_since(since, COUNTED_STATES)
        if stored.id != exclude and stored.proposal.kind == "move_nodes"
    ]


def blast_radius_check(store: Store, stored: StoredProposal, radius: BlastRadius) -> list[str]:
    """Blast-radius problems of a stored proposal, counting the other moves of the last hour."""
    return limits.blast_radius_problems(stored.proposal, radius, recent_moves(store, stored.id))


def approve(
    store: Store,
    proposal_id: str,
    by: str,
    config: ApprovalConfig = DEFAULT_CONFIG,
    *,
    actor: str | None = None,
) -> StoredProposal:
    """A person approves a pending proposal: not its proposer, and within the blast-radius limits.

    `by` is the declared name, `actor` the identity the caller vouches for (default: the store's, which is
    this process's OS identity). Raises ValueError (not a person's name), ApprovalRefusedError (recorded),
    IllegalTransitionError or ProposalExpiredError (nothing recorded).
    """
    check_person(by)
    real = store.actor if actor is None else actor

    def guard(stored: StoredProposal) -> None:
        reasons = four_eyes_problems(by, real, stored)
        reasons += blast_radius_check(store, stored, config.limits)
        if reasons:
            raise ApprovalRefusedError(
                f"approval of {stored.id[:12]} by {by} refused: {'; '.join(reasons)}", reasons
            )

    return store.transition(proposal_id, APPROVED, by, "approved", guard, actor=real)


def reject(
    store: Store, proposal_id: str, by: str, reason: str = "", *, actor: str | None = None
) -> StoredProposal:
    """A person rejects (or, as its proposer, withdraws) a pending proposal."""
    check_person(by)
    return store.transition(proposal_id, REJECTED, by, reason or "rejected", actor=actor)


def auto_approval_problems(proposal: Proposal, bounds: AutoApprove, who: str) -> list[str]:
    """Why `bounds` do not auto-approve this proposal (empty when they do)."""
    problems: list[str] = []
    if proposal.kind == "move_nodes" and bounds.move_nodes is not None:
        moved = len(limits.moved_nodes(proposal))
        if moved > bounds.move_nodes.max_nodes:
            problems.append(
                f"moves {moved} nodes: more than max_nodes {bounds.move_nodes.max_nodes} of {who}"
            )
        reclaimed = proposal.reclaim_nodes
        if reclaimed and not bounds.move_nodes.reclaims:
            problems.append(
                f"takes {len(reclaimed)} node(s) back by reclaim (their jobs requeued): {who} auto-approves "
                "reclaims only with move_nodes.reclaims: true"
            )
    elif proposal.kind == "set_vl_weights" and bounds.set_vl_weights is not None:
        allowed = bounds.set_vl_weights.max_weight_change_per_vl
        for change in proposal.changes:
            if targets.parse_target(change.target).family not in targets.VLARB_FAMILIES:
                problems.append(f"changes {change.target}, which {who} never auto-approves")
        for target, vl, old, new in limits.weight_steps(proposal):
            if old > 0 and new == 0:
                problems.append(f"{target}: VL {vl} weight {old} -> 0 would starve the VL")
            elif abs(new - old) > allowed:
                problems.append(
                    f"{target}: VL {vl} weight {old} -> {new} changes by {abs(new - old)}: "
                    f"more than max_weight_change_per_vl {allowed} of {who}"
                )
    elif proposal.kind == "set_port_group" and bounds.set_port_group is not None:
        sls = sorted(bounds.set_port_group.allowed_sls)
        for change in proposal.changes:
            if targets.parse_target(change.target).family != targets.PORT_GROUP_SL:
                problems.append(f"changes {change.target}, which {who} never auto-approves")
            elif targets.parse_sl(change.after) not in bounds.set_port_group.allowed_sls:
                problems.append(f"{change.target}: SL {change.after} is not in allowed_sls {sls} of {who}")
    else:
        problems.append(f"{who} does not auto-approve {proposal.kind} proposals")
    return problems


def auto_approve(store: Store, proposal_id: str, config: ApprovalConfig) -> Decision:
    """Let an approval policy decide on one pending proposal.

    A kind the policy does not cover is left pending without a record; otherwise the decision (approved,
    or refused with the reasons) is in the audit log as `policy:<name>`.
    """
    if config.name is None:
        raise ValueError("an approval policy needs a name to approve anything")
    who = config.who
    stored = store.get(proposal_id)
    if not config.auto_approve.covers(stored.proposal.kind):
        reason = f"{who} does not auto-approve {stored.proposal.kind} proposals"
        return Decision(proposal_id, False, who, (reason,))

    def guard(current: StoredProposal) -> None:
        reasons: list[str] = []
        if same_party(who, current.proposer):
            reasons.append(f"{who} proposed it; the approver must not be the proposer")
        reasons += auto_approval_problems(current.proposal, config.auto_approve, who)
        reasons += blast_radius_check(store, current, config.limits)
        if reasons:
            raise ApprovalRefusedError(
                f"{who} does not approve {current.id[:12]}: {'; '.join(reasons)}", reasons
            )

    try:
        store.transition(proposal_id, APPROVED, who, "auto-approved within bounds", guard)
    except ApprovalRefusedError as exc:
        return Decision(proposal_id, False, who, tuple(exc.reasons))
    log.info("proposal %s auto-approved by %s", proposal_id[:12], who)
    return Decision(proposal_id, True, who)


def auto_approve_pending(store: Store, config: ApprovalConfig) -> list[Decision]:
    """Let an approval policy decide on every pending proposal it covers."""
    decisions: list[Decision] = []
    for stored in store.list_proposals(PENDING):
        if not config.auto_approve.covers(stored.proposal.kind):
            continue
        try:
            decisions.append(auto_approve(store, stored.id, config))
        except (IllegalTransitionError, ProposalExpiredError) as exc:
            decisions.append(Decision(stored.id, False, config.who, (str(exc),)))
    return decisions
