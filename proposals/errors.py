"""The proposals package's exception hierarchy: one root, one subclass per kind of fault."""

from __future__ import annotations


class ProposalError(Exception):
    """Root of every error the proposals package raises on purpose."""


class ProblemsError(ProposalError):
    """An error that carries every problem found, each prefixed with where it is (file and key)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class ProposalFormatError(ProblemsError):
    """A proposal document is malformed; `problems` lists every bad key."""


class ApprovalConfigError(ProblemsError):
    """An approval policy file is invalid; `problems` lists every bad key with the file."""


class StoreError(ProposalError):
    """The store cannot be opened or is not a proposal store of a version this code reads."""


class StoreDamagedError(StoreError):
    """SQLite finds the store's file damaged (integrity check, or a corruption error while reading)."""


class LookupFailedError(ProposalError):
    """No single proposal answers to an id or id prefix."""


class UnknownProposalError(LookupFailedError):
    """No proposal has this id (or id prefix)."""


class AmbiguousIdError(LookupFailedError):
    """Several proposals share this id prefix."""


class RefusedError(ProposalError):
    """An action was refused by the rules; nothing changed state. `reasons` says why."""

    def __init__(self, message: str, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.reasons = reasons or [message]


class IllegalTransitionError(RefusedError):
    """The state machine does not allow this transition from the proposal's current state."""


class ProposalExpiredError(RefusedError):
    """The proposal is past its `expires_at`; it can no longer be approved or applied."""


class ApprovalRefusedError(RefusedError):
    """The approval rules (approver, auto-approval bounds, blast radius) refused an approval."""
