"""The OpenSM side: OpenSMAdapter apply + verify, rollback and recovery of its records.

The adapter keeps each apply's record (phase, file hashes, backups) in its state dir and reports the record
id with every step; rollback and recovery load that record. A crash after the record was saved but before
its first step reached the store leaves no id: the unfinished record with the same changes is used.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from proposals.model import Change
from scheduler_hooks.apply.sides import AFTER, BEFORE, STALE, Recorded, SideFailedError, SideResult, StepSink
from scheduler_hooks.errors import HookError
from scheduler_hooks.opensm import Change as OsmChange
from scheduler_hooks.opensm import OpenSMAdapter, OpenSMConfig, parse_target
from scheduler_hooks.opensm import record as records
from scheduler_hooks.opensm.targets import Kind

log = logging.getLogger(__name__)

_FILES = {
    Kind.VLARB_HIGH: "config_file",
    Kind.VLARB_LOW: "config_file",
    Kind.SL2VL: "config_file",
    Kind.GROUP_SL: "qos_policy_file",
    Kind.GROUP_MEMBERS: "qos_policy_file",
    Kind.PARTITION_MEMBERS: "partitions_file",
}
_SMP = {Kind.VLARB_HIGH: "smpquery vlarb", Kind.VLARB_LOW: "smpquery vlarb", Kind.SL2VL: "smpquery sl2vl"}
_SMP |= {
    Kind.GROUP_SL: "saquery -p",
    Kind.GROUP_MEMBERS: "saquery -p",
    Kind.PARTITION_MEMBERS: "smpquery pkeys",
}


class OpenSMSide:
    """OpenSM's QoS tables, port groups and partitions, through OpenSMAdapter."""

    name = "opensm"

    def __init__(self, config: OpenSMConfig, adapter: OpenSMAdapter | None = None) -> None:
        self.config = config
        self._sink: StepSink | None = None
        self.adapter = adapter or OpenSMAdapter(config)
        self.adapter.on_step = self._forward

    def _forward(self, step: str, detail: Mapping[str, object]) -> None:
        if self._sink is not None:
            self._sink(step, detail)

    @contextmanager
    def _sinking(self, sink: StepSink) -> Iterator[None]:
        self._sink = sink
        try:
            yield
        finally:
            self._sink = None

    def close(self) -> None:
        """Release the adapter's scratch directory."""
        self.adapter.close()

    # --- reading ---------------------------------------------------------------------------------

    def handles(self, target: str) -> bool:
        """Targets named `opensm.*`."""
        return target.startswith("opensm.")

    def read(self, target: str) -> str:
        """The live value (the fabric's where it shows the target, else the files')."""
        return self.adapter.read(target)

    def status(self, changes: Sequence[Change]) -> dict[str, str]:
        """`stale` where files or fabric show neither side, `after` where all show `after`."""
        stale = set(self.adapter.stale(_plain(changes), allow_after=True))
        at_after = [OsmChange(c.target, c.after, c.after) for c in changes]
        not_after = set(self.adapter.stale(at_after, allow_after=False))
        return {
            c.target: STALE if c.target in stale else (BEFORE if c.target in not_after else AFTER)
            for c in changes
        }

    def validate(self, changes: Sequence[Change]) -> list[str]:
        """The adapter's validation (values, files, port groups, partitions, known members)."""
        return [str(problem) for problem in self.adapter.validate(_plain(changes))]

    def describe(self, changes: Sequence[Change], reclaim: Sequence[str] = ()) -> list[str]:
        """Files to rewrite, the signal, and how the fabric is checked (a reclaim is Slurm's business)."""
        kinds = [parse_target(c.target).kind for c in changes]
        files = sorted({str(getattr(self.config, _FILES[kind])) for kind in kinds})
        checks = sorted({_SMP[kind] for kind in kinds})
        signal = f"pid in {self.config.pid_file}" if self.config.pid_file else f"pid {self.config.pid}"
        return [
            f"validate, then rewrite atomically (previous versions kept): {', '.join(files)}",
            f"SIGHUP OpenSM ({signal}) so that it re-reads them",
            f"verify on the fabric with {', '.join(checks)}; on a mismatch restore the files, signal again",
        ]

    # --- acting ----------------------------------------------------------------------------------

    def apply(
        self, proposal_id: str, changes: Sequence[Change], sink: StepSink, reclaim: Sequence[str] = ()
    ) -> SideResult:
        """apply, then verify; on a mismatch the adapter's rollback restores the previous files (`reclaim`
        is Slurm's business: no job runs in a partition file)."""
        seen: list[tuple[str, Mapping[str, Any]]] = []

        def keep(step: str, detail: Mapping[str, Any]) -> None:
            seen.append((step, detail))
            sink(step, detail)

        plain = _plain(changes)
        with self._sinking(keep):
            try:
                record = self.adapter.apply(plain)
            except (HookError, OSError) as exc:
                raise SideFailedError(f"opensm: {exc}", self._undone(changes, seen)) from exc
            if record.phase == records.NOOP:
                return SideResult.NOOP
            try:
                result = self.adapter.verify(plain, record=record)
            except HookError as exc:
                raise self._roll_back_after(record, f"cannot verify: {exc}") from exc
            if not result.ok:
                raise self._roll_back_after(record, f"verify failed: {result.describe()}")
        return SideResult.APPLIED

    def _roll_back_after(self, record: records.ApplyRecord, why: str) -> SideFailedError:
        """Restore the files of a failed apply; the error to raise (undone or not)."""
        try:
            rolled = self.adapter.rollback(record)
        except (HookError, OSError) as exc:
            return SideFailedError(f"opensm: {why}; rollback failed: {exc}", undone=False)
        if rolled.record.phase != records.ROLLED_BACK:
            return SideFailedError(
                f"opensm: {why}; rollback not verified: {rolled.verify.describe()}", undone=False
            )
        return SideFailedError(f"opensm: {why}; previous files restored", undone=True)

    def _undone(self, changes: Sequence[Change], recorded: Recorded) -> bool:
        """After a failed apply: True when nothing it wrote is left in place."""
        directory = self._record_dir(changes, recorded)
        if directory is None:
            return True
        try:
            return records.load(directory).phase == records.ROLLED_BACK
        except HookError:
            return False

    def rollback(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> None:
        """Restore the files the recorded apply replaced, signal, verify the restore."""
        directory = self._record_dir(changes, recorded)
        if directory is None:
            return
        with self._sinking(sink):
            try:
                record = records.load(directory)
                if record.phase in (records.ROLLED_BACK, records.NOOP):
                    return
                rolled = self.adapter.rollback(record)
            except (HookError, OSError) as exc:
                raise SideFailedError(f"opensm: rollback failed: {exc}", undone=False) from exc
        if rolled.record.phase != records.ROLLED_BACK:
            raise SideFailedError(f"opensm: rollback not verified: {rolled.verify.describe()}", undone=False)

    def recover(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> SideResult:
        """Let the adapter finish (files written: signal, verify) or undo (partly written) the record."""
        directory = self._record_dir(changes, recorded)
        with self._sinking(sink):
            try:
                if directory is None:
                    at_after = all(value == AFTER for value in self.status(changes).values())
                    return SideResult.NOOP if at_after else SideResult.UNTOUCHED
                record = records.load(directory)
                if not record.finished:
                    done = self.adapter.recover(directory)
                    record = done[0].record if done else records.load(directory)
            except (HookError, OSError) as exc:
                raise SideFailedError(f"opensm: recovery failed: {exc}", undone=False) from exc
        if record.phase == records.VERIFIED:
            return SideResult.APPLIED
        if record.phase == records.NOOP:
            return SideResult.NOOP
        if record.phase == records.ROLLED_BACK:
            return SideResult.ROLLED_BACK
        raise SideFailedError(f"opensm: record {record.id} left in phase {record.phase}", undone=False)

    def _record_dir(self, changes: Sequence[Change], recorded: Recorded) -> Path | None:
        """The record directory of this proposal's apply, from its steps or by its changes."""
        ids = [str(detail["record"]) for _, detail in recorded if isinstance(detail.get("record"), str)]
        if ids:
            directory = self.config.state_dir / ids[-1]
            return directory if (directory / records.RECORD_FILE).is_file() else None
        wanted = _plain(changes)
        try:
            matches = [r for r in records.unfinished(self.config.state_dir) if r.changes == wanted]
        except HookError as exc:
            log.warning("cannot list the OpenSM apply records: %s", exc)
            return None
        return Path(matches[-1].directory) if matches else None


def _plain(changes: Sequence[Change]) -> tuple[OsmChange, ...]:
    return tuple(OsmChange(c.target, c.before, c.after) for c in changes)
