"""The apply record: what an apply changed, where the previous files are, and how far it got.

Each apply gets a directory `<state_dir>/<id>/` holding `record.json` (rewritten atomically at every
step) and `backup/` (the previous version of every file it replaces). A record whose phase is not
terminal belongs to an apply that was interrupted; `OpenSMAdapter.recover` finishes or undoes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from scheduler_hooks.errors import ApplyFailedError, RecoveryFailedError
from scheduler_hooks.opensm.files import atomic_write
from scheduler_hooks.opensm.model import Change

PLANNED = "planned"
FILES_WRITTEN = "files_written"
SIGNALLED = "signalled"
VERIFIED = "verified"
VERIFY_FAILED = "verify_failed"
ROLLED_BACK = "rolled_back"
ROLLBACK_UNVERIFIED = "rollback_unverified"
NOOP = "noop"
TERMINAL = frozenset({VERIFIED, ROLLED_BACK, ROLLBACK_UNVERIFIED, NOOP})
RECORD_FILE = "record.json"


@dataclass(frozen=True)
class FileChange:
    """One file an apply replaced: its previous content's hash and copy, and the new content's hash."""

    role: str
    path: str
    backup: str | None
    before_sha256: str | None
    after_sha256: str


@dataclass(frozen=True)
class Step:
    """One durable step, as reported to on_step."""

    name: str
    at: float
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApplyRecord:
    """What one apply did (frozen; every step makes a new record and saves it)."""

    id: str
    created_at: float
    directory: str
    changes: tuple[Change, ...]
    files: tuple[FileChange, ...]
    pid: int | None
    phase: str
    steps: tuple[Step, ...] = ()

    @property
    def finished(self) -> bool:
        """True once nothing is left to complete or undo."""
        return self.phase in TERMINAL

    @property
    def signalled(self) -> bool:
        """True once OpenSM was told to re-read the new files."""
        return any(s.name == SIGNALLED for s in self.steps)

    def advanced(
        self, phase: str, detail: Mapping[str, Any] | None = None, step: str | None = None
    ) -> ApplyRecord:
        """A copy in `phase` with the step appended."""
        entry = Step(step or phase, time.time(), dict(detail or {}))
        return replace(self, phase=phase, steps=(*self.steps, entry))

    def to_json(self) -> str:
        """Canonical JSON."""
        return json.dumps(asdict(self), sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str) -> ApplyRecord:
        """Parse `to_json` output."""
        data = json.loads(text)
        return cls(
            id=data["id"],
            created_at=data["created_at"],
            directory=data["directory"],
            changes=tuple(Change(**c) for c in data["changes"]),
            files=tuple(FileChange(**f) for f in data["files"]),
            pid=data["pid"],
            phase=data["phase"],
            steps=tuple(Step(s["name"], s["at"], s["detail"]) for s in data["steps"]),
        )


def new_id() -> str:
    """A sortable, unique record id."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def save(record: ApplyRecord) -> None:
    """Write the record atomically into its directory."""
    atomic_write(Path(record.directory) / RECORD_FILE, record.to_json().encode())


def load(path: Path) -> ApplyRecord:
    """Load a record from its directory (or its record.json)."""
    file = path if path.name == RECORD_FILE else path / RECORD_FILE
    try:
        return ApplyRecord.from_json(file.read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecoveryFailedError(f"cannot read apply record {file}: {exc}") from exc


def unfinished(state_dir: Path) -> list[ApplyRecord]:
    """Every record under `state_dir` that is not finished, oldest first."""
    if not state_dir.is_dir():
        return []
    records = [load(d) for d in sorted(state_dir.iterdir()) if (d / RECORD_FILE).is_file()]
    return [r for r in records if not r.finished]


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Hold the state directory's lock (one apply, rollback or recovery at a time)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ApplyFailedError(f"another ibpool apply holds {state_dir / 'lock'}") from exc
        yield
    finally:
        os.close(fd)
