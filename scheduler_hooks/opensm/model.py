"""Plain data the OpenSM adapter takes and returns: changes, problems, verification results."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol


class ChangeLike(Protocol):
    """Anything with a target name and its before/after values (a proposal's change is one)."""

    @property
    def target(self) -> str: ...

    @property
    def before(self) -> str | None: ...

    @property
    def after(self) -> str: ...


@dataclass(frozen=True)
class Change:
    """One change to one target: `before` is what the proposer saw live, `after` what to set."""

    target: str
    before: str | None
    after: str


@dataclass(frozen=True)
class Problem:
    """Why a change cannot be applied."""

    target: str
    message: str

    def __str__(self) -> str:
        return f"{self.target}: {self.message}"


@dataclass(frozen=True)
class Mismatch:
    """A place on the fabric that does not (yet) show the expected value."""

    target: str
    where: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.target} at {self.where}: expected {self.expected!r}, saw {self.actual!r}"


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of polling the fabric for the expected values."""

    ok: bool
    mismatches: tuple[Mismatch, ...]
    checks: int
    rounds: int
    seconds: float

    def describe(self) -> str:
        """One line: ok, or the first mismatches."""
        if self.ok:
            return f"verified {self.checks} checks in {self.rounds} rounds ({self.seconds:.2f} s)"
        shown = "; ".join(str(m) for m in self.mismatches[:5])
        more = f" (+{len(self.mismatches) - 5} more)" if len(self.mismatches) > 5 else ""
        return (
            f"{len(self.mismatches)} of {self.checks} checks failed after {self.seconds:.1f} s: {shown}{more}"
        )


@dataclass(frozen=True)
class LiveValue:
    """A target's value in OpenSM's files and on the fabric (None where that source has none)."""

    target: str
    file: str | None
    fabric: str | None
    fabric_by_port: Mapping[str, str]

    @property
    def fabric_consistent(self) -> bool:
        """True when every port read shows the same value."""
        return len(set(self.fabric_by_port.values())) <= 1


StepCallback = Callable[[str, Mapping[str, object]], None]
"""on_step(step_name, detail): called after every durable step of apply, rollback and recover."""
