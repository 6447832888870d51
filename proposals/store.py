"""The proposal store: proposals and their states, an append-only audit log and apply-step records in SQLite.

Durability: WAL journal, `synchronous=FULL`, one `BEGIN IMMEDIATE` transaction per transition that updates
the state and appends its audit entry together, so a process killed at any point leaves both in agreement.
Writers wait for each other up to the busy timeout. One Store per thread (its connection is not shared).

Integrity: opening runs `PRAGMA quick_check` (unless `verify=False`); a damaged file raises
StoreDamagedError, and so does any later SQLite corruption error, never a raw sqlite3 exception. A
`read_only` store is opened with `mode=ro` and writes nothing (no schema upgrade, no journal switch), so a
store on a read-only file, directory or filesystem can still be read. `backup` copies it with SQLite's
online backup API. Every audit entry records the declared `who` and the `actor` (`foundation.identity`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from foundation.identity import os_actor
from proposals import schema
from proposals.errors import (
    AmbiguousIdError,
    ProposalExpiredError,
    RefusedError,
    StoreDamagedError,
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

_HEX_PREFIX = re.compile(r"[0-9a-f]{1,64}")
_PROPOSAL_COLUMNS = "id, body, state, proposer, submitted_at, updated_at, proposer_actor"
_AUDIT_COLUMNS = "seq, at, who, proposal_id, from_state, to_state, result, detail, actor"
_LEGACY_COLUMNS = {  # version 1 had no identities
    _PROPOSAL_COLUMNS: "id, body, state, proposer, submitted_at, updated_at, '' AS proposer_actor",
    _AUDIT_COLUMNS: "seq, at, who, proposal_id, from_state, to_state, result, detail, '' AS actor",
}
_MAX_CHECK_LINES = 3


class Store:
    """Proposals and their lifecycle in one SQLite file."""

    def __init__(
        self,
        path: Path | str,
        *,
        create: bool = True,
        read_only: bool = False,
        verify: bool = True,
        busy_timeout_s: float = 30.0,
        clock: Callable[[], datetime] = utc_now,
        actor: str | None = None,
    ) -> None:
        """Open (with `create`, create) the store; `actor` is recorded on writes that name none (default:
        this process's OS identity)."""
        self.path = Path(path)
        self.read_only = read_only
        self.actor = actor if actor is not None else str(os_actor())
        self._clock = clock
        self._version = schema.VERSION
        if (read_only or not create) and not self.path.exists():
            raise StoreError(f"no proposal store at {self.path}")
        try:
            connect = self._connect_read_only if read_only else self._connect
            self._conn = connect(busy_timeout_s)
        except sqlite3.Error as exc:
            raise _failure(self.path, "cannot open the proposal store", exc) from None
        try:
            if read_only:
                self._version = self._read_version()
            else:
                self._configure(busy_timeout_s)
                self._migrate()
            if verify:
                self._verify()
        except sqlite3.Error as exc:
            self._conn.close()
            raise _failure(self.path, "cannot use the proposal store" + self._read_only_hint(), exc) from None
        except StoreError:
            self._conn.close()
            raise

    def _read_only_hint(self) -> str:
        if self.read_only:
            return ""
        folder = self.path.absolute().parent
        if os.access(self.path, os.W_OK) and os.access(folder, os.W_OK):
            return ""
        return f" (read-only: writing needs write access to {self.path.name} and to {folder}; reads work)"

    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)

    def _connect_read_only(self, busy_timeout_s: float) -> sqlite3.Connection:
        """`mode=ro`; where SQLite cannot create its shared-memory file (a read-only directory) and no
        write-ahead log holds changes, the file alone is the whole store: open it `immutable`."""
        uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            wal = Path(f"{self.path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreError(
                    f"{self.path}: cannot read: {exc} (its write-ahead log {wal.name} holds changes that "
                    "SQLite cannot read without write access to the directory)"
                ) from None
            log.info("reading %s as an immutable file (%s)", self.path, exc)
        return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=busy_timeout_s, isolation_level=None)

    def _configure(self, busy_timeout_s: float) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot switch to the WAL journal (got {mode})")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def _read_version(self) -> int:
        self._conn.execute("PRAGMA query_only = ON")
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if version == 0:
            tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            what = "an SQLite database that is not a proposal store" if tables else "an empty file"
            raise StoreError(f"{self.path}: {what}, not a proposal store")
        self._check_known(version)
        return version

    def _check_known(self, version: int) -> None:
        if version > schema.VERSION:
            raise StoreError(f"{self.path}: store schema version {version}; this code reads {schema.VERSION}")

    def _migrate(self) -> None:
        with self._write():
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version == schema.VERSION:
                return
            self._check_known(version)
            if version == 0:
                tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if tables:
                    raise StoreError(f"{self.path}: an SQLite database that is not a proposal store")
                for statement in schema.STATEMENTS:
                    self._conn.execute(statement)
                log.info("created proposal store %s", self.path)
                version = 1
            for step in range(version, schema.VERSION):
                for statement in schema.MIGRATIONS[step]:
                    self._conn.execute(statement)
                log.info("proposal store %s: schema %d -> %d", self.path, step, step + 1)

    def _verify(self) -> None:
        """`PRAGMA quick_check`: StoreDamagedError unless SQLite finds the file sound."""
        rows = [str(row[0]) for row in self._conn.execute("PRAGMA quick_check").fetchmany(_MAX_CHECK_LINES)]
        if rows != ["ok"]:
            found = "; ".join(rows)
            raise StoreDamagedError(f"{self.path}: the proposal store is damaged: {found}{_RESTORE}")

    def now(self) -> datetime:
        """The store's clock (UTC); the time its audit entries carry."""
        return self._clock()

    def backup(self, dest: Path) -> None:
        """Copy the store to `dest` (which must not exist) with SQLite's online backup API: a consistent
        copy even while others write. The copy is one self-contained file, checked and fsync'd before it
        takes its name."""
        if dest.exists():
            raise StoreError(f"{dest}: already exists; a backup never overwrites")
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        try:
            target = sqlite3.connect(tmp, isolation_level=None)
            try:
                self._conn.backup(target)
                target.execute("PRAGMA journal_mode = DELETE")
                check = str(target.execute("PRAGMA quick_check").fetchone()[0])
            finally:
                target.close()
            if check != "ok":
                raise StoreDamagedError(f"{dest}: the copy fails its integrity check ({check}); not kept")
            with tmp.open("rb") as copy:
                os.fsync(copy.fileno())
            os.link(tmp, dest)  # unlike a rename, never replaces a file that appeared meanwhile
            _fsync_directory(dest.parent)
        except sqlite3.Error as exc:
            raise _failure(self.path, f"cannot back up to {dest}", exc) from None
        except OSError as exc:
            raise StoreError(f"cannot back up {self.path} to {dest}: {exc.strerror or exc}") from None
        finally:
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
        log.info("proposal store %s backed up to %s", self.path, dest)

    def close(self) -> None:
        """Close the connection (committed data is already durable)."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _rows(self, query: str, params: Iterable[Any] = ()) -> list[Any]:
        """Every row of a read query; SQLite failures come out as StoreError (StoreDamagedError)."""
        if self._version < schema.VERSION:
            for columns, legacy in _LEGACY_COLUMNS.items():
                query = query.replace(columns, legacy)
        try:
            return self._conn.execute(query, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise _failure(self.path, "cannot read the proposal store", exc) from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before reading so that the check and the write are atomic.

        SQLite failures (busy past the timeout, I/O errors) come out as StoreError; nothing is committed.
        """
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only; cannot write")
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
                raise _failure(self.path, "write failed, nothing changed", exc) from exc
            raise

    # --- writes -------------------------------------------------------------------------------------

    def submit(
        self, proposal: Proposal, proposer: str | None = None, *, actor: str | None = None
    ) -> tuple[StoredProposal, bool]:
        """Store a proposal as `pending`; (stored, created). Submitting it again changes nothing.

        The proposer is `who` for the approval rules: a user, or `policy:<proposal.policy>` when not given;
        `actor` (default: the store's) is recorded as the proposer's real identity.
        """
        who = proposer if proposer is not None else f"policy:{proposal.policy}"
        _check_who(who)
        actor = self._actor(actor)
        pid = proposal.id
        now = format_sortable(self._clock())
        with self._write() as conn:
            row = conn.execute(f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE id = ?", (pid,)).fetchone()
            if row is not None:
                return self._stored(row), False
            conn.execute(
                "INSERT INTO proposals (id, body, kind, policy, proposer, proposer_actor, state, created_at,"
                " expires_at, submitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    pid,
                    proposal.canonical_json().decode("utf-8"),
                    proposal.kind,
                    proposal.policy,
                    who,
                    actor,
                    PENDING,
                    format_sortable(proposal.created_at),
                    format_sortable(proposal.expires_at),
                    now,
                    now,
                ),
            )
            self._append_audit(
                at=now,
                who=who,
                actor=actor,
                proposal_id=pid,
                from_state=None,
                to_state=PENDING,
                detail="submitted",
            )
        log.info("proposal %s submitted by %s [%s]", pid[:12], who, actor)
        return self.get(pid), True

    def transition(
        self,
        proposal_id: str,
        to_state: str,
        who: str,
        detail: str = "",
        guard: Guard | None = None,
        *,
        actor: str | None = None,
    ) -> StoredProposal:
        """Move a proposal to `to_state` and append the audit entry (with `actor`, default the store's), in
        one transaction.

        Raises IllegalTransitionError or ProposalExpiredError (nothing written), UnknownProposalError, or
        the guard's RefusedError (a `refused` audit entry is written, the state is unchanged).
        """
        _check_who(who)
        actor = self._actor(actor)
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
                    actor=actor,
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
                    actor=actor,
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
        rows = self._rows(
            f"SELECT id FROM proposals WHERE state IN ({marks}) AND expires_at <= ? ORDER BY expires_at",
            (*sorted(EXPIRABLE), format_sortable(moment)),
        )
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
                    actor=self.actor,
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
        actor: str,
        proposal_id: str,
        from_state: str | None,
        to_state: str,
        detail: str,
        result: str = OK,
    ) -> None:
        self._conn.execute(
            "INSERT INTO audit (at, who, actor, proposal_id, from_state, to_state, result, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (at, who, actor, proposal_id, from_state, to_state, result, detail),
        )

    def _actor(self, actor: str | None) -> str:
        text = self.actor if actor is None else actor
        if not text.isprintable() or len(text) > 300:
            raise ValueError(f"`actor` must be printable text of at most 300 characters, got {text!r}")
        return text

    # --- reads --------------------------------------------------------------------------------------

    def get(self, proposal_id: str) -> StoredProposal:
        """The proposal with this full id; UnknownProposalError when there is none."""
        return self._get_row(proposal_id)

    def resolve(self, prefix: str) -> str:
        """The full id a unique id prefix denotes; UnknownProposalError or AmbiguousIdError."""
        text = prefix.strip().lower()
        if not _HEX_PREFIX.fullmatch(text):
            raise UnknownProposalError(f"{prefix!r} is not a proposal id (hex digits)")
        rows = self._rows(
            "SELECT id FROM proposals WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 3", (len(text), text)
        )
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
        rows = self._rows(query + " ORDER BY submitted_at, id", (state,) if state else ())
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
        rows = self._rows(query + " ORDER BY submitted_at, id", params)
        return [self._stored(row) for row in rows]

    def in_flight(self) -> list[StoredProposal]:
        """Proposals found in `applying`: interrupted applies that recovery must complete or roll back."""
        return self.list_proposals(APPLYING)

    def counts(self) -> dict[str, int]:
        """Number of proposals in each state (every state present, zero included)."""
        counts = dict.fromkeys(STATES, 0)
        for state, count in self._rows("SELECT state, count(*) FROM proposals GROUP BY state"):
            counts[str(state)] = int(count)
        return counts

    def approved_since(self, since: datetime, states: Iterable[str]) -> list[StoredProposal]:
        """Proposals approved at or after `since` that are now in one of `states`."""
        wanted = sorted(set(states))
        marks = ", ".join("?" for _ in wanted)
        rows = self._rows(
            f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE state IN ({marks}) AND id IN"
            " (SELECT proposal_id FROM audit WHERE to_state = ? AND result = ? AND at >= ?)"
            " ORDER BY submitted_at, id",
            (*wanted, APPROVED, OK, format_sortable(since)),
        )
        return [self._stored(row) for row in rows]

    def audit(self, proposal_id: str | None = None) -> list[AuditEntry]:
        """Audit entries in order, for one proposal or all."""
        query = f"SELECT {_AUDIT_COLUMNS} FROM audit"
        params: tuple[str, ...] = ()
        if proposal_id is not None:
            query += " WHERE proposal_id = ?"
            params = (proposal_id,)
        return [_audit_entry(row) for row in self._rows(query + " ORDER BY seq", params)]

    def steps(self, proposal_id: str) -> list[StepRecord]:
        """The apply-step records of one proposal, in order."""
        rows = self._rows(
            "SELECT seq, proposal_id, at, step, detail FROM steps WHERE proposal_id = ? ORDER BY seq",
            (proposal_id,),
        )
        return [StepRecord(int(r[0]), str(r[1]), parse_rfc3339(r[2]), str(r[3]), str(r[4])) for r in rows]

    def _get_row(self, proposal_id: str) -> StoredProposal:
        rows = self._rows(f"SELECT {_PROPOSAL_COLUMNS} FROM proposals WHERE id = ?", (proposal_id,))
        row = rows[0] if rows else None
        if row is None:
            raise UnknownProposalError(f"no proposal with id {proposal_id}")
        return self._stored(row)

    def _stored(self, row: tuple[str, str, str, str, str, str, str]) -> StoredProposal:
        pid, body, state, proposer, submitted_at, updated_at, proposer_actor = row
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != pid:
            raise StoreError(f"{self.path}: proposal {pid[:12]} does not match its id (altered or corrupt)")
        return StoredProposal(
            id=pid,
            proposal=from_json(body, f"stored proposal {pid[:12]}"),
            state=state,
            proposer=proposer,
            submitted_at=parse_rfc3339(submitted_at),
            updated_at=parse_rfc3339(updated_at),
            proposer_actor=proposer_actor,
        )


def _audit_entry(row: tuple[int, str, str, str, str | None, str, str, str, str]) -> AuditEntry:
    seq, at, who, pid, from_state, to_state, result, detail, actor = row
    return AuditEntry(int(seq), parse_rfc3339(at), who, pid, from_state, to_state, result, detail, actor)


_RESTORE = (
    "; nothing was read or changed. Keep the file for inspection and restore the latest backup"
    " (`ibpool proposals backup`, docs/approvals.md)"
)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _failure(path: Path, what: str, exc: sqlite3.Error) -> StoreError:
    """A StoreError for an SQLite failure; StoreDamagedError when SQLite reports a damaged file."""
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return StoreDamagedError(f"{path}: {what}: the file is damaged ({exc}){_RESTORE}")
    return StoreError(f"{path}: {what}: {exc}")


def _check_who(who: str) -> None:
    if not who or not who.isprintable() or who != who.strip() or len(who) > 200:
        raise ValueError(f"`who` must be a printable name of 1-200 characters, got {who!r}")
