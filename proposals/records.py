"""What the store hands back: a stored proposal with its state, audit entries and apply-step records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from proposals.model import Proposal
from proposals.timestamps import format_rfc3339

OK = "ok"
REFUSED = "refused"


@dataclass(frozen=True)
class StoredProposal:
    """A proposal as the store holds it: content, state and who proposed it.

    `proposer` is the name given at submit (or `policy:<policy>`); `proposer_actor` the identity the system
    vouched for (`foundation.identity`; '' for proposals stored before identities were recorded).
    """

    id: str
    proposal: Proposal
    state: str
    proposer: str
    submitted_at: datetime
    updated_at: datetime
    proposer_actor: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "id": self.id,
            "state": self.state,
            "proposer": self.proposer,
            "proposer_actor": self.proposer_actor,
            "submitted_at": format_rfc3339(self.submitted_at),
            "updated_at": format_rfc3339(self.updated_at),
            "proposal": self.proposal.to_dict(),
        }


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit log: a transition (`ok`) or a refused decision (`refused`, state unchanged).

    `from_state` is None for the submission that created the proposal. `who` is the declared name (`--by`,
    `policy:<name>`, `system`); `actor` the identity the system vouched for ('' in entries written before
    identities were recorded).
    """

    seq: int
    at: datetime
    who: str
    proposal_id: str
    from_state: str | None
    to_state: str
    result: str
    detail: str
    actor: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "seq": self.seq,
            "at": format_rfc3339(self.at),
            "who": self.who,
            "actor": self.actor,
            "proposal_id": self.proposal_id,
            "from_state": self.from_state,
            "to_state": self.to_state,
            "result": self.result,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class StepRecord:
    """One step of an apply or a rollback, as the scheduler hooks recorded it."""

    seq: int
    proposal_id: str
    at: datetime
    step: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "seq": self.seq,
            "proposal_id": self.proposal_id,
            "at": format_rfc3339(self.at),
            "step": self.step,
            "detail": self.detail,
        }
