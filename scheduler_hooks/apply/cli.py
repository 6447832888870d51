"""`ibpool apply ID [--yes] [--config.file FILE] [--db PATH] [--by NAME] [--recover] [--json]`.

Without `--yes` a dry run: the plan is printed and nothing changes. The config is `--config.file FILE`, else
`$IBPOOL_APPLY_CONFIG`, else /etc/ibpool/apply.yaml; the store is `--db`, else `$IBPOOL_DB`, else
/var/lib/ibpool/ibpool.db (as for `ibpool proposals`). Exit: 0 done (applied, already applied, already in
effect; a dry run that would apply; a recovery that completed or rolled back everything), 1 refused
(nothing changed), 2 usage or configuration error, 3 failed and rolled back, 4 failed and not rolled back
(an operator must look: `ibpool proposals show ID`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from foundation.identity import os_actor
from foundation.logs import LOG_LEVELS, configure_logging
from proposals.approval import check_person
from proposals.cli import db_path
from proposals.errors import LookupFailedError, RefusedError, StoreError
from proposals.store import Store
from scheduler_hooks.apply.config import ApplyConfig, load_apply_config
from scheduler_hooks.apply.dryrun import make_plan, render
from scheduler_hooks.apply.opensm_side import OpenSMSide
from scheduler_hooks.apply.orchestrator import ApplyBusyError, Orchestrator, Outcome
from scheduler_hooks.apply.sides import Side, UnconfiguredTargetsError, group_changes
from scheduler_hooks.apply.slurm_side import SlurmSide
from scheduler_hooks.errors import HookConfigError, HookError

DEFAULT_CONFIG = Path("/etc/ibpool/apply.yaml")
CONFIG_ENV = "IBPOOL_APPLY_CONFIG"
OK, REFUSED, USAGE, FAILED_NOT_UNDONE = 0, 1, 2, 4


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ibpool apply",
        description="Apply an approved proposal to OpenSM and Slurm (a dry run unless --yes).",
    )
    p.add_argument("id", nargs="?", help="proposal id or unique id prefix")
    p.add_argument("--yes", action="store_true", help="apply for real (default: dry run)")
    p.add_argument(
        "--config.file",
        dest="config",
        type=Path,
        help=f"apply config (default ${CONFIG_ENV}, else {DEFAULT_CONFIG})",
    )
    p.add_argument("--config", dest="config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument(
        "--db", type=Path, help="proposal store (default $IBPOOL_DB, else /var/lib/ibpool/ibpool.db)"
    )
    p.add_argument(
        "--by", help="display name of who applies (default: the login name; the OS identity is recorded too)"
    )
    p.add_argument("--recover", action="store_true", help="complete or roll back interrupted applies")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--log.level", dest="log_level", default="warning", choices=LOG_LEVELS)
    p.add_argument(
        "--log-level", dest="log_level", default=argparse.SUPPRESS, choices=LOG_LEVELS, help=argparse.SUPPRESS
    )
    return p


def main(argv: Sequence[str]) -> int:
    """Run `ibpool apply`; see the module docstring for the exit codes."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else USAGE
    configure_logging(args.log_level)
    if args.id is None and not args.recover:
        return _fail("give a proposal id (or --recover)", USAGE)
    problems: list[str] = []
    who = args.by or os_actor().name
    try:
        check_person(who)
    except ValueError as exc:
        problems.append(f"--by: {exc}")
    try:
        config = load_apply_config(_config_path(args.config))
    except HookConfigError as exc:
        problems += exc.problems
    if problems:
        return _problems(problems)
    try:
        store = Store(db_path(args.db), create=False)
    except StoreError as exc:
        return _fail(str(exc), USAGE)
    try:
        with store, _sides(config) as sides:
            return _run(args, config, store, sides, who)
    except UnconfiguredTargetsError as exc:
        missing = sorted({t.partition(".")[0] for t in exc.targets})
        return _problems([f"{config.source}: {name}: not configured, but {exc}" for name in missing])
    except LookupFailedError as exc:
        return _fail(str(exc), REFUSED)
    except RefusedError as exc:
        return _fail(f"refused: {exc}", REFUSED)
    except ApplyBusyError as exc:
        return _fail(f"refused: {exc}", REFUSED)
    except (HookError, StoreError) as exc:
        return _fail(f"stopped: {exc}; run `ibpool apply --recover`", FAILED_NOT_UNDONE)


def _run(args: argparse.Namespace, config: ApplyConfig, store: Store, sides: list[Side], who: str) -> int:
    pid = store.resolve(args.id) if args.id else None
    limits = config.approval.limits
    orchestrator = Orchestrator(store, sides, limits=limits, who=who, state_dir=config.state_dir)
    if args.recover:
        outcomes = orchestrator.recover(pid)
        _show(outcomes, None, args.json)
        return max([OK, *(FAILED_NOT_UNDONE for o in outcomes if o.result == "failed")])
    assert pid is not None
    group_changes(sides, store.get(pid).proposal.changes)  # every target has a configured side
    if not args.yes:
        plan = make_plan(store, sides, limits, pid)
        print(json.dumps(plan.to_dict(), indent=2) if args.json else render(plan))
        return OK if plan.would_apply else REFUSED
    outcome, recovered = orchestrator.apply(pid)
    _show(recovered, outcome, args.json)
    return outcome.exit_code


@contextlib.contextmanager
def _sides(config: ApplyConfig) -> Iterator[list[Side]]:
    sides: list[Side] = []
    try:
        if config.opensm is not None:
            sides.append(OpenSMSide(config.opensm))
        if config.slurm is not None:
            sides.append(SlurmSide(config.slurm))
        yield sides
    finally:
        for side in sides:
            side.close()


def _show(recovered: list[Outcome], outcome: Outcome | None, as_json: bool) -> None:
    if as_json:
        data: dict[str, Any] = {"recovered": [o.to_dict() for o in recovered]}
        if outcome is not None:
            data["outcome"] = outcome.to_dict()
        print(json.dumps(data, indent=2))
        return
    for item in recovered:
        print(f"{item.proposal_id}  recovered: {item.result}: {item.message}")
    if outcome is None and not recovered:
        print("nothing to recover")
    if outcome is not None:
        stream = sys.stdout if outcome.exit_code == OK else sys.stderr
        print(f"{outcome.proposal_id}  {outcome.result}: {outcome.message}", file=stream)
        if outcome.result in ("applied", "rolled_back", "failed"):
            print(f"  audit trail: ibpool proposals show {outcome.proposal_id[:12]}", file=stream)


def _config_path(given: Path | None) -> Path:
    if given is not None:
        return given
    env = os.environ.get(CONFIG_ENV)
    return Path(env) if env else DEFAULT_CONFIG


def _problems(problems: list[str]) -> int:
    for problem in problems:
        print(f"ibpool apply: {problem}", file=sys.stderr)
    return USAGE


def _fail(message: str, code: int) -> int:
    print(f"ibpool apply: {message}", file=sys.stderr)
    return code
