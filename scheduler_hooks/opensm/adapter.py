"""OpenSMAdapter: read, validate, apply, verify, roll back and recover changes to OpenSM's files.

apply: validate everything (nothing is written on any problem) -> check OpenSM's pid -> render ->
back up the files being replaced and save the record (`planned`) -> replace each file atomically
(`file_written`, then `files_written`) -> SIGHUP (`signalled`). verify polls the fabric; rollback
restores the previous files, signals and verifies the restore; recover finishes or undoes a record left
unfinished by a crash. Every durable step is saved in the record before `on_step` hears of it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler_hooks.errors import (
    ApplyFailedError,
    ChangeRejectedError,
    HookError,
    LiveStateError,
    RecoveryFailedError,
    SignalFailedError,
)
from scheduler_hooks.opensm import record as records
from scheduler_hooks.opensm import signalling
from scheduler_hooks.opensm.commands import Diag, Runner
from scheduler_hooks.opensm.config import OpenSMConfig
from scheduler_hooks.opensm.fabric import FabricReader
from scheduler_hooks.opensm.files import atomic_write, copy_durably, remove_durably, sha256, text_sha256
from scheduler_hooks.opensm.live import Expected, LiveState
from scheduler_hooks.opensm.model import (
    Change,
    ChangeLike,
    LiveValue,
    Mismatch,
    Problem,
    StepCallback,
    VerifyResult,
)
from scheduler_hooks.opensm.record import ApplyRecord, FileChange
from scheduler_hooks.opensm.render import Texts, file_value, render
from scheduler_hooks.opensm.targets import (
    MEMBER_KINDS,
    Kind,
    Target,
    ValueFormatError,
    canonical,
    parse_target,
)
from scheduler_hooks.opensm.validate import Context, validate
from scheduler_hooks.opensm.verify import poll

log = logging.getLogger(__name__)
INTERRUPTED_PHASES = (records.PLANNED, records.FILES_WRITTEN)


@dataclass(frozen=True)
class RollbackResult:
    """The record after a rollback and the verification of the restored values."""

    record: ApplyRecord
    verify: VerifyResult


@dataclass(frozen=True)
class Recovery:
    """What recover did with one unfinished record: `completed` or `rolled_back`."""

    record: ApplyRecord
    action: str
    verify: VerifyResult


def _no_step(step: str, detail: Mapping[str, object]) -> None:
    """The default on_step: log only."""


class OpenSMAdapter:
    """Acts on OpenSM's QoS tables, port groups and partitions through its files and SIGHUP."""

    def __init__(
        self, config: OpenSMConfig, on_step: StepCallback | None = None, runner: Runner | None = None
    ) -> None:
        self.config = config
        self.on_step = on_step or _no_step
        self.diag = Diag(config.diag, runner)
        self.live = LiveState(config, FabricReader(self.diag, config.diag.concurrency))

    def close(self) -> None:
        """Release the diagnostics' scratch directory."""
        self.diag.close()

    def __enter__(self) -> OpenSMAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading ---------------------------------------------------------------------------------

    def read_sources(self, target: str) -> LiveValue:
        """The target's canonical value in the files and on the fabric (per port)."""
        return self.live.sources(_target(target))

    def read(self, target: str) -> str:
        """The live value: the fabric's where it shows the target (all ports agreeing), else the files'."""
        value = self.read_sources(target)
        if value.fabric_by_port and not value.fabric_consistent:
            shown = "; ".join(f"{k}: {v!r}" for k, v in list(value.fabric_by_port.items())[:4])
            raise LiveStateError(f"{target}: the fabric's ports disagree ({shown})")
        live = value.fabric if value.fabric is not None else value.file
        if live is None:
            raise LiveStateError(f"{target}: set neither in the files nor visible on the fabric")
        return live

    def stale(self, changes: Sequence[ChangeLike], allow_after: bool = True) -> list[str]:
        """Targets whose live value (files or fabric) differs from `before`.

        With `allow_after`, a target that already shows `after` everywhere is not stale (applying it
        again is a no-op). A target that cannot be read counts as stale.
        """
        out: list[str] = []
        for change in changes:
            try:
                target = _target(change.target)
                value = self.live.sources(target)
                names = self.live.topology().names if target.kind in MEMBER_KINDS else None
                before = None if change.before is None else _comparable(target, change.before, names)
                after = _comparable(target, change.after, names)
            except (HookError, ValueError) as exc:
                log.warning("%s: counted as stale: %s", change.target, exc)
                out.append(change.target)
                continue
            values = [value.file, *value.fabric_by_port.values()]
            seen = {_comparable(target, v, names) for v in values if v is not None}
            if not value.fabric_consistent or seen - {before}:
                if allow_after and seen == {after}:
                    continue
                out.append(change.target)
        return out

    def validate(self, changes: Sequence[ChangeLike]) -> list[Problem]:
        """Every problem with `changes`; empty means apply may write them."""
        need_fabric = any(_kind_needs_names(c.target) for c in changes)
        return validate(changes, self.live.context(need_fabric))

    # --- applying --------------------------------------------------------------------------------

    def apply(self, changes: Sequence[ChangeLike]) -> ApplyRecord:
        """Validate, write the files atomically (previous versions kept) and SIGHUP OpenSM.

        Raises ChangeRejectedError (nothing written or signalled) on any validation problem;
        SignalFailedError before writing when the pid is not a live OpenSM; ApplyFailedError while an
        earlier apply was interrupted before signalling (run `recover` first). A change set already in
        effect in the files and on the fabric writes and signals nothing (phase `noop`).
        """
        plain = tuple(Change(c.target, c.before, c.after) for c in changes)
        with records.locked(self.config.state_dir):
            interrupted = [
                r.id for r in records.unfinished(self.config.state_dir) if r.phase in INTERRUPTED_PHASES
            ]
            if interrupted:
                raise ApplyFailedError(f"interrupted apply {', '.join(interrupted)}: run recover first")
            context = self.live.context(any(_kind_needs_names(c.target) for c in plain))
            problems = validate(plain, context)
            if problems or context.texts is None:
                self._step("refused", {"problems": [str(p) for p in problems]})
                raise ChangeRejectedError([str(p) for p in problems])
            pid = signalling.opensm_pid(self.config)
            pending = [(t, c.after) for c in plain if not _in_file(t := _target(c.target), c.after, context)]
            rendered = render(pending, context.texts, context.names)
            writes = _writes(self.config, context.texts, rendered)
            if not writes and self._in_effect(plain):
                record = ApplyRecord(records.new_id(), time.time(), "", plain, (), pid, records.NOOP)
                self._step("noop", {"record": record.id})
                return record.advanced(records.NOOP)
            record = self._plan(plain, writes, pid)
            for (role, path, text), file in zip(writes, record.files, strict=True):
                if sha256(path) != file.before_sha256:
                    self._restore(record)
                    self._advance(record, records.ROLLED_BACK, {"reason": f"{path} changed meanwhile"})
                    raise ApplyFailedError(f"{path} changed while apply {record.id} was writing; restored")
                atomic_write(path, text.encode())
                record = self._advance(
                    record, record.phase, {"role": role, "path": str(path)}, "file_written"
                )
            record = self._advance(record, records.FILES_WRITTEN, {"files": len(writes)})
            return self._signal(record)

    def _in_effect(self, changes: Sequence[Change]) -> bool:
        """True when the fabric already shows every change's `after` (files already match)."""
        try:
            return not self.stale([Change(c.target, c.after, c.after) for c in changes], allow_after=False)
        except HookError:
            return False

    def _plan(
        self, changes: tuple[Change, ...], writes: list[tuple[str, Path, str]], pid: int
    ) -> ApplyRecord:
        record_id = records.new_id()
        directory = self.config.state_dir / record_id
        (directory / "backup").mkdir(parents=True)
        files: list[FileChange] = []
        for role, path, text in writes:
            backup: str | None = None
            if path.exists():
                copy = directory / "backup" / f"{role}-{path.name}"
                copy_durably(path, copy)
                backup = str(copy)
            files.append(FileChange(role, str(path), backup, sha256(path), text_sha256(text)))
        record = ApplyRecord(
            record_id, time.time(), str(directory), changes, tuple(files), pid, records.PLANNED
        )
        return self._advance(record, records.PLANNED, {"files": [f.path for f in files]})

    def _reread(self) -> dict[str, Any]:
        """SIGHUP OpenSM; the step detail (pid, and where its log stood just before)."""
        log_file = signalling.log_path(self.config)
        offset = signalling.log_size(log_file)
        pid = signalling.reread(self.config)
        return {"pid": pid, "log_file": str(log_file), "log_offset": offset}

    def _signal(self, record: ApplyRecord) -> ApplyRecord:
        try:
            detail = self._reread()
        except SignalFailedError as exc:
            log.error("apply %s: %s; restoring the previous files", record.id, exc)
            self._restore(record)
            self._advance(record, records.ROLLED_BACK, {"reason": str(exc), "signalled": False})
            raise
        return self._advance(record, records.SIGNALLED, detail)

    # --- verifying -------------------------------------------------------------------------------

    def verify(
        self, changes: Sequence[ChangeLike], timeout: float | None = None, record: ApplyRecord | None = None
    ) -> VerifyResult:
        """Poll the fabric until it shows every `after` or `timeout` passes; record the outcome if given."""
        expected = []
        names = self.live.topology().names
        for change in changes:
            target = _target(change.target)
            previous = _canonical_or_none(target, change.before, names)
            expected.append(Expected(target, canonical(target, change.after, names), previous))
        result = self._poll(expected, timeout, _log_watch(record))
        if record is not None and record.directory:
            phase = records.VERIFIED if result.ok else records.VERIFY_FAILED
            self._advance(records.load(Path(record.directory)), phase, _result_detail(result))
        return result

    def _poll(
        self, expected: Sequence[Expected], timeout: float | None, log_watch: tuple[Path, int] | None
    ) -> VerifyResult:
        checks = self.live.checks(expected, self.live.texts())
        verify_config = self.config.verify
        errors = None if log_watch is None else functools.partial(signalling.log_errors, *log_watch)
        return poll(
            self.live.reader, checks, timeout or verify_config.timeout, verify_config.interval, errors
        )

    def apply_verified(
        self, changes: Sequence[ChangeLike], timeout: float | None = None
    ) -> tuple[ApplyRecord, VerifyResult]:
        """apply, verify, and roll back on a mismatch; the final record and the apply's verification."""
        record = self.apply(changes)
        if record.phase == records.NOOP:
            return record, VerifyResult(True, (), 0, 0, 0.0)
        result = self.verify(changes, timeout, record)
        if result.ok:
            return records.load(Path(record.directory)), result
        return self.rollback(record, timeout).record, result

    # --- undoing ---------------------------------------------------------------------------------

    def rollback(self, record: ApplyRecord, timeout: float | None = None) -> RollbackResult:
        """Restore the files the apply replaced (atomically), SIGHUP, and verify the restored values."""
        if not record.directory:  # a no-op apply changed nothing
            return RollbackResult(record, VerifyResult(True, (), 0, 0, 0.0))
        with records.locked(self.config.state_dir):
            return self._rollback(records.load(Path(record.directory)), timeout)

    def _rollback(self, record: ApplyRecord, timeout: float | None) -> RollbackResult:
        restored = self._restore(record)
        record = self._advance(record, record.phase, {"files": restored}, "files_restored")
        if restored or record.signalled:
            try:
                detail = self._reread()
            except SignalFailedError as exc:
                result = VerifyResult(
                    False, (Mismatch("opensm", "SIGHUP", "delivered", str(exc)),), 1, 0, 0.0
                )
                record = self._advance(record, records.ROLLBACK_UNVERIFIED, _result_detail(result))
                return RollbackResult(record, result)
            record = self._advance(record, record.phase, detail, "rollback_signalled")
        result = self._poll(self._restored_expectations(record), timeout, _log_watch(record))
        phase = records.ROLLED_BACK if result.ok else records.ROLLBACK_UNVERIFIED
        return RollbackResult(self._advance(record, phase, _result_detail(result)), result)

    def _restore(self, record: ApplyRecord) -> list[str]:
        """Put back every file the record replaced that still holds what the apply wrote."""
        conflicts = [
            f.path for f in record.files if sha256(Path(f.path)) not in (f.before_sha256, f.after_sha256)
        ]
        if conflicts:
            raise RecoveryFailedError(
                f"changed by someone else since apply {record.id}: {', '.join(conflicts)}"
            )
        restored: list[str] = []
        for file in record.files:
            path = Path(file.path)
            if sha256(path) == file.before_sha256:
                continue
            if file.backup is None:
                remove_durably(path)
            else:
                atomic_write(path, Path(file.backup).read_bytes())
            restored.append(file.path)
        return restored

    def _restored_expectations(self, record: ApplyRecord) -> list[Expected]:
        """What the fabric should show once the restored files are in effect (from the files)."""
        texts = self.live.texts()
        names = self.live.topology().names
        out: list[Expected] = []
        for change in record.changes:
            target = _target(change.target)
            value = self.live.file_value(target, texts)
            if value is not None:
                out.append(Expected(target, value, _canonical_or_none(target, change.after, names)))
        return out

    def recover(self, record_or_state_dir: ApplyRecord | Path) -> list[Recovery]:
        """Finish or undo every unfinished apply (one record, a record directory, or the state dir).

        planned (files maybe partly written) -> roll back, unless every file already holds the new
        content; files_written -> signal, verify; signalled -> verify; a failed verification -> roll back.
        """
        with records.locked(self.config.state_dir):
            if isinstance(record_or_state_dir, ApplyRecord):
                pending = [records.load(Path(record_or_state_dir.directory))]
            elif (record_or_state_dir / records.RECORD_FILE).is_file():
                pending = [records.load(record_or_state_dir)]
            else:
                pending = records.unfinished(record_or_state_dir)
            return [self._recover(r) for r in pending if not r.finished]

    def _recover(self, record: ApplyRecord) -> Recovery:
        self._step("recovering", {"record": record.id, "phase": record.phase})
        written = all(sha256(Path(f.path)) == f.after_sha256 for f in record.files)
        if record.phase == records.PLANNED and written:
            record = self._advance(record, records.FILES_WRITTEN, {"recovered": True})
        if record.phase == records.FILES_WRITTEN:
            try:
                record = self._advance(record, records.SIGNALLED, self._reread())
            except SignalFailedError as exc:
                log.error("recover %s: %s; rolling back", record.id, exc)
        if record.phase == records.SIGNALLED and written:
            result = self.verify(record.changes, record=record)
            if result.ok:
                return Recovery(records.load(Path(record.directory)), "completed", result)
            record = records.load(Path(record.directory))
        rolled = self._rollback(record, None)
        return Recovery(rolled.record, "rolled_back", rolled.verify)

    # --- steps -----------------------------------------------------------------------------------

    def _advance(
        self, record: ApplyRecord, phase: str, detail: Mapping[str, Any], step: str | None = None
    ) -> ApplyRecord:
        record = record.advanced(phase, detail, step)
        records.save(record)
        self._step(step or phase, {"record": record.id, **detail})
        return record

    def _step(self, name: str, detail: Mapping[str, object]) -> None:
        log.info("opensm step %s: %s", name, dict(detail))
        self.on_step(name, detail)


def _target(name: str) -> Target:
    try:
        return parse_target(name)
    except ValueError as exc:
        raise ChangeRejectedError([f"{name}: {exc}"]) from exc


def _kind_needs_names(name: str) -> bool:
    try:
        return parse_target(name).kind in MEMBER_KINDS
    except ValueError:
        return False


def _comparable(target: Target, value: str, names: Mapping[str, tuple[str, ...]] | None) -> str:
    """The canonical value as the fabric can show it: a `both` partition member reads back as full."""
    if target.kind is Kind.PARTITION_MEMBERS:
        value = ",".join(m.split("=")[0] if m.endswith("=both") else m for m in value.split(","))
    return canonical(target, value, names)


def _in_file(target: Target, after: str, context: Context) -> bool:
    """True when the files already hold `after` for `target` (so they are not rewritten for it)."""
    assert context.texts is not None
    try:
        value = file_value(target, context.texts, context.names, context.port_names)
    except ValueError:
        return False
    return value == canonical(target, after, context.names)


def _canonical_or_none(target: Target, value: str | None, names: Mapping[str, tuple[str, ...]]) -> str | None:
    if value is None:
        return None
    try:
        return canonical(target, value, names)
    except ValueFormatError:
        return None


def _writes(config: OpenSMConfig, texts: Texts, rendered: Texts) -> list[tuple[str, Path, str]]:
    """(role, path, new text) for each file whose text changes."""
    out: list[tuple[str, Path, str]] = []
    pairs = [
        ("config", config.config_file, texts.config, rendered.config),
        ("policy", config.qos_policy_file, texts.policy, rendered.policy),
        ("partitions", config.partitions_file, texts.partitions, rendered.partitions),
    ]
    for role, path, old, new in pairs:
        if new is not None and new != old:
            out.append((role, path, new))
    return out


def _log_watch(record: ApplyRecord | None) -> tuple[Path, int] | None:
    """OpenSM's log and where it stood at the record's last signal (None: never signalled)."""
    for step in reversed(record.steps if record is not None else ()):
        if "log_offset" in step.detail:
            return Path(str(step.detail["log_file"])), int(step.detail["log_offset"])
    return None


def _result_detail(result: VerifyResult) -> dict[str, Any]:
    return {"ok": result.ok, "checks": result.checks, "mismatches": [str(m) for m in result.mismatches[:20]]}
