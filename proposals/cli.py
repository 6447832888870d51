"""`ibpool proposals submit|list|show|approve|reject|auto-approve|expire|audit|backup`.

The store is `--db PATH`, else `$IBPOOL_DB`, else /var/lib/ibpool/ibpool.db; only `submit` creates it;
`list`, `show`, `audit` and `backup` open it read-only. The approval policy file (blast-radius limits,
auto-approval bounds) is `--config.file FILE`, else `$IBPOOL_APPROVAL_CONFIG`, else built-in default limits.
Who acts is the operating system's account (`foundation.identity`); `--by` is a display name, recorded
beside it. Exit 0 ok, 1 refused (illegal transition, approver is the proposer, outside limits, unknown
id), 2 usage, format or configuration error, or a store that is missing, damaged or cannot be written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from foundation.identity import os_actor
from foundation.logs import LOG_LEVELS, configure_logging
from proposals import approval
from proposals.approval_config import DEFAULT_CONFIG, ApprovalConfig, load_approval_config
from proposals.errors import LookupFailedError, ProblemsError, RefusedError, StoreError
from proposals.model import MAX_DOCUMENT_BYTES, document_size_problem, from_json
from proposals.records import AuditEntry, StoredProposal
from proposals.states import STATES
from proposals.store import Store
from proposals.timestamps import format_rfc3339

DEFAULT_DB = Path("/var/lib/ibpool/ibpool.db")
DB_ENV = "IBPOOL_DB"
CONFIG_ENV = "IBPOOL_APPROVAL_CONFIG"

OK, REFUSED, USAGE = 0, 1, 2


class UsageError(Exception):
    """A command-line mistake; exit 2 with the message."""


def db_path(given: Path | None) -> Path:
    """The store path: the flag, else $IBPOOL_DB, else the default."""
    if given is not None:
        return given
    env = os.environ.get(DB_ENV)
    return Path(env) if env else DEFAULT_DB


def _parser() -> argparse.ArgumentParser:
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument(
        "--db",
        type=Path,
        default=argparse.SUPPRESS,
        help=f"proposal store (default ${DB_ENV}, else {DEFAULT_DB})",
    )
    db.add_argument("--log.level", dest="log_level", default=argparse.SUPPRESS, choices=LOG_LEVELS)
    db.add_argument(
        "--log-level", dest="log_level", default=argparse.SUPPRESS, choices=LOG_LEVELS, help=argparse.SUPPRESS
    )
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument(
        "--config.file",
        dest="config",
        type=Path,
        help=f"approval policy file (default ${CONFIG_ENV}, else built-in limits)",
    )
    config.add_argument(
        "--config", dest="config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    p = argparse.ArgumentParser(prog="ibpool proposals", description="Proposals: review, approve, audit.")
    p.add_argument(
        "--db", type=Path, default=None, help=f"proposal store (default ${DB_ENV}, else {DEFAULT_DB})"
    )
    p.add_argument("--log.level", dest="log_level", default="warning", choices=LOG_LEVELS)
    p.add_argument(
        "--log-level", dest="log_level", default=argparse.SUPPRESS, choices=LOG_LEVELS, help=argparse.SUPPRESS
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("submit", parents=[db], help="validate and store a proposal file; print its id")
    s.add_argument("file", help=f"proposal JSON file (at most {MAX_DOCUMENT_BYTES} bytes), or - for stdin")
    s.add_argument("--by", help="the person submitting (default: policy:<the proposal's policy>)")
    s = sub.add_parser("list", parents=[db], help="list proposals")
    s.add_argument("--state", choices=STATES)
    s.add_argument("--json", action="store_true", help="one JSON array")
    s = sub.add_parser("show", parents=[db], help="one proposal as JSON, with its audit trail and steps")
    s.add_argument("id", help="id or unique id prefix")
    s = sub.add_parser("approve", parents=[db, config], help="approve a pending proposal")
    s.add_argument("id", help="id or unique id prefix")
    s.add_argument("--by", help="display name of the approver (default: your login name; never the proposer)")
    s = sub.add_parser("reject", parents=[db], help="reject a pending proposal")
    s.add_argument("id", help="id or unique id prefix")
    s.add_argument("--by", help="display name of the rejecting person (default: your login name)")
    s.add_argument("--reason", default="", help="why (recorded in the audit log)")
    s = sub.add_parser("auto-approve", parents=[db, config], help="let the approval policy decide")
    s.add_argument("id", nargs="?", help="one proposal (default: every pending one the policy covers)")
    sub.add_parser("expire", parents=[db], help="expire pending and approved proposals past expires_at")
    s = sub.add_parser("audit", parents=[db], help="the audit log, of one proposal or all")
    s.add_argument("id", nargs="?", help="id or unique id prefix")
    s.add_argument("--json", action="store_true", help="one JSON array")
    s = sub.add_parser("backup", parents=[db], help="copy the store, consistently, to a new file DEST")
    s.add_argument("dest", type=Path, help="the copy (must not exist)")
    return p


def main(argv: Sequence[str]) -> int:
    """Run one proposals command; exit 0 ok, 1 refused, 2 usage/format/config error."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else USAGE
    configure_logging(args.log_level)
    command: Callable[[argparse.Namespace], int] = _COMMANDS[args.command]
    try:
        return command(args)
    except ProblemsError as exc:
        for problem in exc.problems:
            _err(problem)
        return USAGE
    except (UsageError, StoreError, ValueError) as exc:
        _err(str(exc))
        return USAGE
    except RefusedError as exc:
        _err(f"refused: {exc}")
        return REFUSED
    except LookupFailedError as exc:
        _err(str(exc))
        return REFUSED
    except BrokenPipeError:  # the reader went away (`| head`): nothing is wrong here
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK


def _err(message: str) -> None:
    print(f"ibpool proposals: {message}", file=sys.stderr)


def _open(args: argparse.Namespace, create: bool = False, read_only: bool = False) -> Store:
    return Store(db_path(args.db), create=create, read_only=read_only, actor=str(os_actor()))


def _by(args: argparse.Namespace) -> str:
    """The display name: `--by`, else the login name of the OS identity."""
    name = args.by if args.by is not None else os_actor().name
    try:
        approval.check_person(name)
    except ValueError as exc:
        raise UsageError(f"{exc}; give a display name with --by") from None
    return str(name)


def _config(args: argparse.Namespace) -> ApprovalConfig:
    path = args.config
    if path is None and os.environ.get(CONFIG_ENV):
        path = Path(os.environ[CONFIG_ENV])
    return load_approval_config(path) if path is not None else DEFAULT_CONFIG


def _submit(args: argparse.Namespace) -> int:
    if args.by is not None:
        approval.check_person(args.by)
    source = "<stdin>" if args.file == "-" else args.file
    data = _read_bounded(args.file, source)
    proposal = from_json(data, source)
    with _open(args, create=True) as store:
        stored, created = store.submit(proposal, args.by)
    if not created:
        _err(f"already submitted by {stored.proposer}; it is {stored.state}")
    print(stored.id)
    return OK


def _read_bounded(name: str, source: str) -> bytes:
    """The bytes of a proposal file (or stdin), read no further than one byte past the size limit."""
    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
        else:
            with Path(name).open("rb") as f:
                data = f.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{source}: cannot read: {exc.strerror or exc}") from None
    problem = document_size_problem(len(data))
    if problem:
        raise UsageError(f"{source}: {problem}")
    return data


def _list(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        rows = store.list_proposals(args.state)
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2, ensure_ascii=False))
        return OK
    header = ("ID", "STATE", "KIND", "POLICY", "PROPOSER", "EXPIRES")
    table = [header] + [
        (
            row.id[:12],
            row.state,
            row.proposal.kind,
            row.proposal.policy,
            row.proposer,
            format_rfc3339(row.proposal.expires_at),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return OK


def _show(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        stored = store.get(store.resolve(args.id))
        data: dict[str, Any] = stored.to_dict()
        data["audit"] = [entry.to_dict() for entry in store.audit(stored.id)]
        data["steps"] = [step.to_dict() for step in store.steps(stored.id)]
    print(json.dumps(data, indent=2, ensure_ascii=False))
    return OK


def _approve(args: argparse.Namespace) -> int:
    by = _by(args)
    config = _config(args)
    with _open(args) as store:
        stored = approval.approve(store, store.resolve(args.id), by, config)
    _done(stored)
    return OK


def _reject(args: argparse.Namespace) -> int:
    by = _by(args)
    with _open(args) as store:
        stored = approval.reject(store, store.resolve(args.id), by, args.reason)
    _done(stored)
    return OK


def _auto_approve(args: argparse.Namespace) -> int:
    config = _config(args)
    if config.name is None:
        raise UsageError("auto-approve needs an approval policy file with a name (--config)")
    with _open(args) as store:
        if args.id is not None:
            decisions = [approval.auto_approve(store, store.resolve(args.id), config)]
        else:
            decisions = approval.auto_approve_pending(store, config)
    for decision in decisions:
        verdict = "approved" if decision.approved else "left pending: " + "; ".join(decision.reasons)
        print(f"{decision.proposal_id}  {decision.who}  {verdict}")
    return REFUSED if args.id is not None and not decisions[0].approved else OK


def _expire(args: argparse.Namespace) -> int:
    with _open(args) as store:
        for pid in store.expire_due():
            print(f"{pid}  expired")
    return OK


def _audit(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        entries = store.audit(store.resolve(args.id) if args.id else None)
    if args.json:
        print(json.dumps([entry.to_dict() for entry in entries], indent=2, ensure_ascii=False))
        return OK
    for entry in entries:
        print(_audit_line(entry))
    return OK


def _backup(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        store.backup(args.dest)
    print(args.dest)
    return OK


def _audit_line(entry: AuditEntry) -> str:
    move = f"{entry.from_state or '-'} -> {entry.to_state}"
    who = f"{entry.who} [{entry.actor}]" if entry.actor else entry.who
    line = f"{format_rfc3339(entry.at)}  {entry.proposal_id[:12]}  {who}  {move}  {entry.result}"
    return f"{line}  {entry.detail}" if entry.detail else line


def _done(stored: StoredProposal) -> None:
    print(f"{stored.id}  {stored.state}")


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "submit": _submit,
    "list": _list,
    "show": _show,
    "approve": _approve,
    "reject": _reject,
    "auto-approve": _auto_approve,
    "expire": _expire,
    "audit": _audit,
    "backup": _backup,
}
