"""One exception root for the scheduler hooks, with the failures callers tell apart."""

from __future__ import annotations


class HookError(Exception):
    """Root of every error raised by a scheduler hook."""


class HookConfigError(HookError):
    """A hook's configuration is invalid; `problems` lists every fault at once (file and key)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class ChangeRejectedError(HookError):
    """A change failed validation before anything was written; `problems` lists every fault at once."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class CommandFailedError(HookError):
    """A command the hook ran could not start, timed out or exited non-zero."""


class LiveStateError(HookError):
    """The live value of a target could not be read (or the sources disagree)."""


class ApplyFailedError(HookError):
    """Applying a change stopped part-way; the record says how far it got."""


class SignalFailedError(ApplyFailedError):
    """The managed daemon could not be signalled (no pid, wrong process, not running)."""


class RecoveryFailedError(HookError):
    """An interrupted apply could neither be completed nor rolled back."""


# Earlier names (ruff N818 wants the Error suffix); kept so existing imports keep working.
ChangeRejected = ChangeRejectedError
CommandFailed = CommandFailedError
ApplyFailed = ApplyFailedError
SignalFailed = SignalFailedError
RecoveryFailed = RecoveryFailedError


class SlurmConfError(HookError):
    """slurm.conf cannot be edited safely (partition missing, defined twice, continued line) or written."""


class SlurmStaleChangeError(ChangeRejectedError):
    """A Slurm partition no longer holds the change's `before` (nor its `after`); nothing was changed."""


class SlurmApplyFailedError(ApplyFailedError):
    """A Slurm move stopped part-way and was undone; `record` (an ApplyRecord) holds every step."""

    def __init__(self, message: str, record: object) -> None:
        super().__init__(message)
        self.record = record


class SlurmDrainDeadlineError(SlurmApplyFailedError):
    """Running jobs did not end before the deadline; the nodes were resumed and no partition changed."""
