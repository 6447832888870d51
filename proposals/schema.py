"""The store's SQLite schema (version 2); the audit log and step records are append-only by trigger.

A new store is created at version 1 (`STATEMENTS`) and brought up by every step of `MIGRATIONS`, so an old
store and a new one end up alike. Version 2 records who really acted (`foundation.identity`): `actor` on
every audit entry and `proposer_actor` on every proposal; rows written before it hold ''.
"""

from __future__ import annotations

from proposals.states import STATES

VERSION = 2

_STATE_LIST = ", ".join(f"'{state}'" for state in STATES)


def _append_only(table: str) -> tuple[str, ...]:
    return tuple(
        f"CREATE TRIGGER {table}_no_{action} BEFORE {action.upper()} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
        for action in ("update", "delete")
    )


def _frozen(columns: str) -> str:
    return (
        f"CREATE TRIGGER proposals_frozen BEFORE UPDATE OF {columns} ON proposals "
        "BEGIN SELECT RAISE(ABORT, 'a proposal is frozen; only its state changes'); END"
    )


STATEMENTS: tuple[str, ...] = (
    f"""CREATE TABLE proposals (
        id TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        kind TEXT NOT NULL,
        policy TEXT NOT NULL,
        proposer TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ({_STATE_LIST})),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        submitted_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX proposals_state ON proposals (state, expires_at)",
    "CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals "
    "BEGIN SELECT RAISE(ABORT, 'proposals are never deleted'); END",
    _frozen("id, body, kind, policy, proposer, created_at, expires_at, submitted_at"),
    f"""CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        who TEXT NOT NULL,
        proposal_id TEXT NOT NULL REFERENCES proposals (id),
        from_state TEXT,
        to_state TEXT NOT NULL CHECK (to_state IN ({_STATE_LIST})),
        result TEXT NOT NULL CHECK (result IN ('ok', 'refused')),
        detail TEXT NOT NULL
    )""",
    "CREATE INDEX audit_proposal ON audit (proposal_id, seq)",
    "CREATE INDEX audit_to_state ON audit (to_state, at)",
    *_append_only("audit"),
    """CREATE TABLE steps (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        proposal_id TEXT NOT NULL REFERENCES proposals (id),
        at TEXT NOT NULL,
        step TEXT NOT NULL,
        detail TEXT NOT NULL
    )""",
    "CREATE INDEX steps_proposal ON steps (proposal_id, seq)",
    *_append_only("steps"),
    "PRAGMA user_version = 1",
)
"""Version 1, as it was first released."""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE audit ADD COLUMN actor TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE proposals ADD COLUMN proposer_actor TEXT NOT NULL DEFAULT ''",
        "DROP TRIGGER proposals_frozen",
        _frozen("id, body, kind, policy, proposer, proposer_actor, created_at, expires_at, submitted_at"),
        "PRAGMA user_version = 2",
    ),
}
"""Version -> the statements that bring a store of that version to the next one."""
