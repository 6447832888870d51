"""The proposal store: proposals and their states, an append-only audit log and apply-step records in SQLite.

Durability: WAL journal, `synchronous=FULL`, one `BEGIN IMMEDIATE` transaction per transition that updates
the state and appends its audit entry together, so a process killed at any point leaves both in agreement.
Writers wait for each other up to the busy timeout. One Store per thread (its connection is not shared).
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType

from proposals import schema
from proposals.errors import (
    AmbiguousIdError,
    ProposalExpiredError,
    RefusedError,
    StoreError,
    UnknownProposalError,
)
from proposals.model import Proposal, from_json
from proposals.records import OK, REFUSED, AuditEntry, StepRecord, StoredProposal
from proposals.states import APPLYING, APPROVED, EXPIRABLE, EXPIRED, PENDING, STATES, check_transition
from proposals.timestamps import format_sortable, parse_rfc3339, utc_now

log = logging.getLogger(__name__)

SYSTEM = "system"
"""`who` for transitions the store makes on its own (expiry)."""

Guard = Callable[[StoredProposal], None]
"""Runs inside a transition's transaction; raises RefusedError to refuse it (recorded as `refused`)."""

_HEX_PREFIX = re.compile(r"^[0-9a-f]{1,64}$")
_PROPOSAL_COLUMNS = "id, body, state, proposer, submitted_at, updated_at"
_AUDIT_COLUMNS = "seq, at, who, proposal_id, from_state, to_state, result, detail"


class Store:
    """Proposals and their lifecycle in one SQLite file."""

    def __init__(
        self,
        path: Path | str,
        *,
        create: bool = True,
        busy_timeout_s: float = 30.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        if not create and not self.path.exists():
            raise StoreError(f"no proposal store at {self.path}")
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open proposal store {self.path}: {exc}") from None
        try:
            self._configure(busy_timeout_s)
            self._migrate()
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(f"cannot use proposal store {self.path}: {exc}") from None
        except StoreError:
            self._conn.close()
            raise

    def _configure(self, busy_timeout_s: float) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot switch to the WAL journal (got {mode})")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        with self._write():
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version == schema.VERSION:
                return
            if version != 0:
                raise StoreError(
                    f"{self.path}: store schema version {version}; this code reads {schema.VERSION}"
                )
            tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise StoreError(f"{self.path}: an SQLite database that is not a proposal store")
            for statement in schema.STATEMENTS:
                self._conn.execute(statement)
            log.info("created proposal store %s", self.path)

    def now(self) -> datetime:
        """The store's clock (UTC); the time its audit entries carry."""
        return self._clock()

    def close(self) -> None:
        """Close the connection (committed data is already durable)."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before reading so that the check and the write are atomic.

        SQLite failures (busy past the timeout, I/O errors) come out as StoreError; nothing is committed.
        """
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot start a write: {exc}") from None
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{self.path}: write failed, nothing changed: {exc}") from exc
            raise

    # --- writes -------------------------------------------------------------------------------------

    def submit(self, proposal: Proposal, proposer: str | None = None) -> tuple[StoredProposal, bool]:
        """Store a proposal as `pending`; (stored, created). Submitting it again changes nothing.

        The proposer is `who` for the approval rules: a user, or `policy:<proposal.policy>` when not given.
        """
        who = proposer if proposer is not None else f"policy:{proposal.policy}"
        _check_who(who)
        pid = proposal.id
        now = format_sortable(self._clock())
        with self._write() as conn:
            row = conn.execute(f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE id = ?", (pid,)).fetchone()
            if row is not None:
                return self._stored(row), False
            conn.execute(
                "INSERT INTO proposals (id, body, kind, policy, proposer, state, created_at, expires_at,"
                " submitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    pid,
                    proposal.canonical_json().decode("utf-8"),
                    proposal.kind,
                    proposal.policy,
                    who,
                    PENDING,
                    format_sortable(proposal.created_at),
                    format_sortable(proposal.expires_at),
                    now,
                    now,
                ),
            )
            self._append_audit(
                at=now, who=who, proposal_id=pid, from_state=None, to_state=PENDING, detail="submitted"
            )
        log.info("proposal %s submitted by %s", pid[:12], who)
        return self.get(pid), True

    def transition(
        self, proposal_id: str, to_state: str, who: str, detail: str = "", guard: Guard | None = None
    ) -> StoredProposal:
        """Move a proposal to `to_state` and append the audit entry, in one transaction.

        Raises IllegalTransitionError or ProposalExpiredError (nothing written), UnknownProposalError, or
        the guard's RefusedError (a `refused` audit entry is written, the state is unchanged).
        """
        _check_who(who)
        refusal: RefusedError | None = None
        moment = self._clock()
        now = format_sortable(moment)
        with self._write() as conn:
            stored = self._get_row(proposal_id)
            check_transition(proposal_id, stored.state, to_state)
            if to_state in (APPROVED, APPLYING) and moment >= stored.proposal.expires_at:
                raise ProposalExpiredError(
                    f"proposal {proposal_id[:12]} expired at {stored.proposal.to_dict()['expires_at']}; "
                    f"it cannot become {to_state}"
                )
            if guard is not None:
                try:
                    guard(stored)
                except RefusedError as exc:
                    refusal = exc
            if refusal is not None:
                reasons = "; ".join(refusal.reasons)
                text = f"refused {to_state}: {reasons}" + (f" ({detail})" if detail else "")
                self._append_audit(
                    at=now,
                    who=who,
                    proposal_id=proposal_id,
                    from_state=stored.state,
                    to_state=stored.state,
                    result=REFUSED,
                    detail=text,
                )
            else:
                conn.execute(
                    "UPDATE proposals SET state = ?, updated_at = ? WHERE id = ?",
                    (to_state, now, proposal_id),
                )
                self._append_audit(
                    at=now,
                    who=who,
                    proposal_id=proposal_id,
                    from_state=stored.state,
                    to_state=to_state,
                    detail=detail,
                )
        if refusal is not None:
            log.info("proposal %s: %s refused %s: %s", proposal_id[:12], who, to_state, refusal)
            raise refusal
        log.info("proposal %s: %s -> %s by %s", proposal_id[:12], stored.state, to_state, who)
        return self.get(proposal_id)

    def expire_due(self, now: datetime | None = None, who: str = SYSTEM) -> list[str]:
        """Move every pending or approved proposal whose `expires_at` has passed to `expired`; their ids."""
        moment = now if now is not None else self._clock()
        marks = ", ".join("?" for _ in EXPIRABLE)
        rows = self._conn.execute(
            f"SELECT id FROM proposals WHERE state IN ({marks}) AND expires_at <= ? ORDER BY expires_at",
            (*sorted(EXPIRABLE), format_sortable(moment)),
        ).fetchall()
        expired: list[str] = []
        for (pid,) in rows:
            with self._write() as conn:
                # Re-read inside the transaction: another process may have moved it meanwhile.
                state = conn.execute("SELECT state FROM proposals WHERE id = ?", (pid,)).fetchone()[0]
                if state not in EXPIRABLE:
                    continue
                stamp = format_sortable(self._clock())
                conn.execute(
                    "UPDATE proposals SET state = ?, updated_at = ? WHERE id = ?", (EXPIRED, stamp, pid)
                )
                self._append_audit(
                    at=stamp,
                    who=who,
                    proposal_id=pid,
                    from_state=state,
                    to_state=EXPIRED,
                    detail="past expires_at",
                )
            expired.append(pid)
            log.info("proposal %s expired", pid[:12])
        return expired

    def record_step(self, proposal_id: str, step: str, detail: str = "") -> int:
        """Append one apply or rollback step for a proposal; its sequence number."""
        if not step:
            raise ValueError("a step needs a name")
        with self._write() as conn:
            self._get_row(proposal_id)
            cursor = conn.execute(
                "INSERT INTO steps (proposal_id, at, step, detail) VALUES (?, ?, ?, ?)",
                (proposal_id, format_sortable(self._clock()), step, detail),
            )
        seq = cursor.lastrowid
        assert seq is not None  # an INSERT into a rowid table always sets it
        return seq

    def _append_audit(
        self,
        *,
        at: str,
        who: str,
        proposal_id: str,
        from_state: str | None,
        to_state: str,
        detail: str,
        result: str = OK,
    ) -> None:
        self._conn.execute(
            "INSERT INTO audit (at, who, proposal_id, from_state, to_state, result, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (at, who, proposal_id, from_state, to_state, result, detail),
        )

    # --- reads --------------------------------------------------------------------------------------

    def get(self, proposal_id: str) -> StoredProposal:
        """The proposal with this full id; UnknownProposalError when there is none."""
        return self._get_row(proposal_id)

    def resolve(self, prefix: str) -> str:
        """The full id a unique id prefix denotes; UnknownProposalError or AmbiguousIdError."""
        text = prefix.strip().lower()
        if not _HEX_PREFIX.fullmatch(text):
            raise UnknownProposalError(f"{prefix!r} is not a proposal id (hex digits)")
        rows = self._conn.execute(
            "SELECT id FROM proposals WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 3", (len(text), text)
        ).fetchall()
        if not rows:
            raise UnknownProposalError(f"no proposal with id {text}")
        if len(rows) > 1:
            shown = ", ".join(row[0][:12] for row in rows)
            raise AmbiguousIdError(
                f"id prefix {text} matches several proposals ({shown}...); give more digits"
            )
        return str(rows[0][0])

    def list_proposals(self, state: str | None = None) -> list[StoredProposal]:
        """Proposals in submission order, optionally only those in one state."""
        if state is not None and state not in STATES:
            raise ValueError(f"unknown state {state!r}; states are {', '.join(STATES)}")
        query = f"SELECT {_PROPOSAL_COLUMNS} FROM proposals"
        query += " WHERE state = ?" if state is not None else ""
        rows = self._conn.execute(query + " ORDER BY submitted_at, id", (state,) if state else ()).fetchall()
        return [self._stored(row) for row in rows]

    def list_kind(self, kind: str, states: Iterable[str] | None = None) -> list[StoredProposal]:
        """Proposals of one kind in submission order, optionally only those in `states`."""
        query = f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE kind = ?"
        params: list[str] = [kind]
        if states is not None:
            wanted = sorted(set(states))
            unknown = [state for state in wanted if state not in STATES]
            if unknown:
                raise ValueError(f"unknown states {unknown!r}; states are {', '.join(STATES)}")
            query += f" AND state IN ({', '.join('?' for _ in wanted)})"
            params += wanted
        rows = self._conn.execute(query + " ORDER BY submitted_at, id", params).fetchall()
        return [self._stored(row) for row in rows]

    def in_flight(self) -> list[StoredProposal]:
        """Proposals found in `applying`: interrupted applies that recovery must complete or roll back."""
        return self.list_proposals(APPLYING)

    def counts(self) -> dict[str, int]:
        """Number of proposals in each state (every state present, zero included)."""
        counts = dict.fromkeys(STATES, 0)
        for state, count in self._conn.execute("SELECT state, count(*) FROM proposals GROUP BY state"):
            counts[str(state)] = int(count)
        return counts

    def approved_since(self, since: datetime, states: Iterable[str]) -> list[StoredProposal]:
        """Proposals approved at or after `since` that are now in one of `states`."""
        wanted = sorted(set(states))
        marks = ", ".join("?" for _ in wanted)
        rows = self._conn.execute(
            f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE state IN ({marks}) AND id IN"
            " (SELECT proposal_id FROM audit WHERE to_state = ? AND result = ? AND at >= ?)"
            " ORDER BY submitted_at, id",
            (*wanted, APPROVED, OK, format_sortable(since)),
        ).fetchall()
        return [self._stored(row) for row in rows]

    def audit(self, proposal_id: str | None = None) -> list[AuditEntry]:
        """Audit entries in order, for one proposal or all."""
        query = f"SELECT {_AUDIT_COLUMNS} FROM audit"
        params: tuple[str, ...] = ()
        if proposal_id is not None:
            query += " WHERE proposal_id = ?"
            params = (proposal_id,)
        return [_audit_entry(row) for row in self._conn.execute(query + " ORDER BY seq", params)]

    def steps(self, proposal_id: str) -> list[StepRecord]:
        """The apply-step records of one proposal, in order."""
        rows = self._conn.execute(
            "SELECT seq, proposal_id, at, step, detail FROM steps WHERE proposal_id = ? ORDER BY seq",
            (proposal_id,),
        )
        return [StepRecord(int(r[0]), str(r[1]), parse_rfc3339(r[2]), str(r[3]), str(r[4])) for r in rows]

    def _get_row(self, proposal_id: str) -> StoredProposal:
        row = self._conn.execute(
            f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE id = ?", (proposal_id,)
        ).fetchone()
        if row is None:
            raise UnknownProposalError(f"no proposal with id {proposal_id}")
        return self._stored(row)

    def _stored(self, row: tuple[str, str, str, str, str, str]) -> StoredProposal:
        pid, body, state, proposer, submitted_at, updated_at = row
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != pid:
            raise StoreError(f"{self.path}: proposal {pid[:12]} does not match its id (altered or corrupt)")
        return StoredProposal(
            id=pid,
            proposal=from_json(body, f"stored proposal {pid[:12]}"),
            state=state,
            proposer=proposer,
            submitted_at=parse_rfc3339(submitted_at),
            updated_at=parse_rfc3339(updated_at),
        )


def _audit_entry(row: tuple[int, str, str, str, str | None, str, str, str]) -> AuditEntry:
    seq, at, who, pid, from_state, to_state, result, detail = row
    return AuditEntry(int(seq), parse_rfc3339(at), who, pid, from_state, to_state, result, detail)


def _check_who(who: str) -> None:
    if not who or not who.isprintable() or who != who.strip() or len(who) > 200:
        raise ValueError(f"`who` must be a printable name of 1-200 characters, got {who!r}")
