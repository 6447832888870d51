"""Sides for the simulated cluster (`ClusterServer`): changes go in over its HTTP controls.

Changes go in the forms the real systems take (opensm.conf QoS lines, `scontrol update` words); live state
is read back as an operator would see it (QoS tables from `/-/model`, partitions from the scheduler
exporter). Each side records its steps, verifies by reading back, puts `before` back on a mismatch, and
rolls back or recovers from its steps. `SimulatedQosSide` takes `opensm.vlarb_*` and `opensm.sl2vl`,
`SimulatedSlurmSide` `slurm.partition.<pool>.nodes` (docs/simulator.md); with a frozen clock, its
`advance_seconds` advances the model while it waits for drained jobs. The simulated scheduler has no
requeue: a proposal's reclaim drains here like any move (as the real hooks do with `reclaims: as_drain`).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence

from prometheus_client.parser import text_string_to_metric_families

from proposals import targets
from proposals.model import Change
from scheduler_hooks.apply.sides import AFTER, BEFORE, STALE, Recorded, SideFailedError, SideResult, StepSink
from scheduler_hooks.errors import HookError, LiveStateError

_QOS_KEYS = {
    targets.VLARB_HIGH: ("vlarb_high", "qos_vlarb_high"),
    targets.VLARB_LOW: ("vlarb_low", "qos_vlarb_low"),
    targets.SL2VL: ("sl2vl", "qos_sl2vl"),
}


class SimulatedControlError(HookError):
    """The simulated server refused a control or could not be reached."""


class _Client:
    """GET and POST against the simulated server."""

    def __init__(self, base_url: str, timeout_seconds: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout_seconds

    def get(self, path: str) -> str:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=self.timeout) as answer:
                return str(answer.read().decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise LiveStateError(f"GET {path}: {exc}") from None

    def post(self, path: str, body: str = "") -> str:
        request = urllib.request.Request(self.base_url + path, data=body.encode(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                data = json.loads(answer.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            try:
                reason = json.loads(exc.read().decode("utf-8")).get("error", str(exc))
            except ValueError:
                reason = str(exc)
            raise SimulatedControlError(f"POST {path} {body!r}: {reason}") from None
        except (OSError, ValueError) as exc:
            raise SimulatedControlError(f"POST {path}: {exc}") from None
        return str(data.get("result", ""))


def _status(changes: Sequence[Change], live: Mapping[str, str]) -> dict[str, str]:
    return {
        c.target: AFTER if live[c.target] == c.after else BEFORE if live[c.target] == c.before else STALE
        for c in changes
    }


def _recorded(recorded: Recorded) -> list[str]:
    return [step for step, _ in recorded]


class SimulatedQosSide:
    """OpenSM's QoS tables on the simulated cluster."""

    name = "opensm"

    def __init__(self, base_url: str, timeout_seconds: float = 10.0) -> None:
        self.client = _Client(base_url, timeout_seconds)

    def close(self) -> None:
        """Nothing to release."""

    def handles(self, target: str) -> bool:
        """`opensm.vlarb_high`, `opensm.vlarb_low`, `opensm.sl2vl`."""
        return target in _QOS_KEYS

    def read(self, target: str) -> str:
        """The table in force, in the proposals' canonical form."""
        try:
            qos = json.loads(self.client.get("/-/model"))["qos"]
            value = str(qos[_QOS_KEYS[target][0]])
        except (KeyError, TypeError, ValueError) as exc:
            raise LiveStateError(f"/-/model has no QoS table for {target}: {exc}") from None
        if target == targets.SL2VL:
            return targets.format_sl2vl(targets.parse_sl2vl(value))
        return targets.format_vlarb(targets.parse_vlarb(value)) if value else ""

    def status(self, changes: Sequence[Change]) -> dict[str, str]:
        """Per target: before, after or stale."""
        return _status(changes, {c.target: self.read(c.target) for c in changes})

    def validate(self, changes: Sequence[Change]) -> list[str]:
        """Every value must parse as its table."""
        problems: list[str] = []
        for change in changes:
            parse = targets.parse_sl2vl if change.target == targets.SL2VL else targets.parse_vlarb
            try:
                parse(change.after)
            except ValueError as exc:
                problems.append(f"opensm: {change.target}: {exc}")
        return problems

    def describe(self, changes: Sequence[Change], reclaim: Sequence[str] = ()) -> list[str]:
        """The opensm.conf lines posted."""
        return [f"POST /-/control/vl-weights {self._body(changes, 'after')!r}", "read back from /-/model"]

    @staticmethod
    def _body(changes: Sequence[Change], side: str) -> str:
        return "\n".join(f"{_QOS_KEYS[c.target][1]} {getattr(c, side)}" for c in changes) + "\n"

    def _set(self, changes: Sequence[Change], side: str) -> list[str]:
        """Post one side's values; the targets that do not read back as posted."""
        self.client.post("/-/control/vl-weights", self._body(changes, side))
        return [c.target for c in changes if self.read(c.target) != getattr(c, side)]

    def apply(
        self, proposal_id: str, changes: Sequence[Change], sink: StepSink, reclaim: Sequence[str] = ()
    ) -> SideResult:
        """Post the new tables, read back; on a mismatch put `before` back."""
        if all(v == AFTER for v in self.status(changes).values()):
            return SideResult.NOOP
        sink("posted", {"proposal": proposal_id, "body": self._body(changes, "after")})
        try:
            wrong = self._set(changes, "after")
        except HookError as exc:
            raise SideFailedError(f"opensm: {exc}", undone=self._undo(changes)) from exc
        if wrong:
            undone = self._undo(changes)
            raise SideFailedError(f"opensm: read back differs for {', '.join(wrong)}", undone)
        sink("verified", {"targets": [c.target for c in changes]})
        return SideResult.APPLIED

    def _undo(self, changes: Sequence[Change]) -> bool:
        try:
            return not self._set(changes, "before")
        except HookError:
            return False

    def rollback(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> None:
        """Post `before` again and read it back."""
        if "posted" not in _recorded(recorded):
            return
        try:
            wrong = self._set(changes, "before")
        except HookError as exc:
            raise SideFailedError(f"opensm: rollback failed: {exc}", undone=False) from exc
        if wrong:
            raise SideFailedError(f"opensm: rollback reads back wrong {', '.join(wrong)}", undone=False)
        sink("restored", {"proposal": proposal_id})

    def recover(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> SideResult:
        """Verified or reading `after`: applied; posted but not in effect: rolled back; else untouched."""
        status = self.status(changes)
        if all(v == AFTER for v in status.values()):
            sink("verified", {"targets": sorted(status), "recovered": True})
            return SideResult.APPLIED
        if "posted" not in _recorded(recorded):
            return SideResult.UNTOUCHED
        self.rollback(proposal_id, changes, recorded, sink)
        return SideResult.ROLLED_BACK


class SimulatedSlurmSide:
    """Slurm partitions (pools) on the simulated cluster."""

    name = "slurm"

    def __init__(
        self,
        base_url: str,
        *,
        timeout_seconds: float = 10.0,
        drain_deadline_seconds: float = 600.0,
        poll_seconds: float = 1.0,
        advance_seconds: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = _Client(base_url, timeout_seconds)
        self.drain_deadline_seconds = drain_deadline_seconds
        self.poll_seconds = poll_seconds
        self.advance_seconds = advance_seconds
        self._sleep = sleep

    def close(self) -> None:
        """Nothing to release."""

    def handles(self, target: str) -> bool:
        """`slurm.partition.<pool>.nodes`."""
        try:
            return targets.parse_target(target).family == targets.SLURM_NODES
        except ValueError:
            return False

    def _scheduler(self) -> tuple[dict[str, set[str]], dict[str, str]]:
        """Partition members and node states, as the scheduler exporter shows them."""
        members: dict[str, set[str]] = {}
        states: dict[str, str] = {}
        try:
            for family in text_string_to_metric_families(self.client.get("/scheduler/metrics")):
                for sample in family.samples:
                    if sample.name == "ibpool_pool_node_info" and sample.value == 1:
                        members.setdefault(sample.labels["pool"], set()).add(sample.labels["node"])
                    elif sample.name == "ibpool_pool_capacity_gpus":
                        members.setdefault(sample.labels["pool"], set())
                    elif sample.name == "ibpool_node_state_info" and sample.value == 1:
                        states[sample.labels["node"]] = sample.labels["state"]
        except (KeyError, ValueError) as exc:
            raise LiveStateError(f"cannot parse /scheduler/metrics: {exc}") from None
        return members, states

    def read(self, target: str) -> str:
        """The partition's full node list."""
        pool = targets.parse_target(target).pool or ""
        members, _ = self._scheduler()
        if pool not in members:
            raise LiveStateError(f"no partition {pool!r}")
        return targets.format_node_list(members[pool])

    def status(self, changes: Sequence[Change]) -> dict[str, str]:
        """Per target: before, after or stale."""
        members, _ = self._scheduler()
        live = {}
        for change in changes:
            pool = targets.parse_target(change.target).pool or ""
            if pool not in members:
                raise LiveStateError(f"no partition {pool!r}")
            live[change.target] = targets.format_node_list(members[pool])
        return _status(changes, live)

    def validate(self, changes: Sequence[Change]) -> list[str]:
        """Known partitions, known nodes, valid lists, no partition left empty."""
        members, states = self._scheduler()
        problems: list[str] = []
        for change in changes:
            pool = targets.parse_target(change.target).pool or ""
            try:
                nodes = targets.parse_node_list(change.after)
            except ValueError as exc:
                problems.append(f"slurm: {change.target}: {exc}")
                continue
            if pool not in members:
                problems.append(f"slurm: {change.target}: no partition {pool!r}")
            unknown = [n for n in nodes if n not in states]
            if unknown:
                problems.append(f"slurm: {change.target}: unknown nodes {', '.join(unknown)}")
            if not nodes:
                problems.append(f"slurm: {change.target}: would leave partition {pool} empty")
        return problems

    @staticmethod
    def _leaving(changes: Sequence[Change]) -> list[str]:
        gone: set[str] = set()
        for change in changes:
            gone |= set(targets.parse_node_list(change.before)) - set(targets.parse_node_list(change.after))
        return targets.sorted_nodes(gone)

    def describe(self, changes: Sequence[Change], reclaim: Sequence[str] = ()) -> list[str]:
        """Drain, the partition updates, resume, read back."""
        lines = []
        leaving = self._leaving(changes)
        if leaving:
            lines.append(f"POST /-/control/drain NodeName={','.join(leaving)}; wait until their jobs end")
        lines += [self._update(c, "after") for c in changes]
        if leaving:
            lines.append(f"POST /-/control/resume NodeName={','.join(leaving)}")
        lines.append("read the partitions back from /scheduler/metrics")
        return lines

    @staticmethod
    def _update(change: Change, side: str) -> str:
        pool = targets.parse_target(change.target).pool
        return f"PartitionName={pool} Nodes={getattr(change, side)}"

    def _set(self, changes: Sequence[Change], side: str) -> list[str]:
        for change in changes:
            self.client.post("/-/control/partition", self._update(change, side))
        live = self.status(changes)
        return [c.target for c in changes if live[c.target] != side]

    def _wait_drained(self, nodes: Sequence[str]) -> bool:
        """Whether every node is drained (its jobs ended) before the deadline."""
        waited = 0.0
        while True:
            _, states = self._scheduler()
            if all(states.get(n) in ("drained", "down") for n in nodes):
                return True
            if waited >= self.drain_deadline_seconds:
                return False
            if self.advance_seconds is not None:
                self.client.post(f"/-/control/advance?seconds={self.advance_seconds:g}")
                waited += self.advance_seconds
            else:
                self._sleep(self.poll_seconds)
                waited += self.poll_seconds

    def _resume(self, nodes: Sequence[str]) -> None:
        if nodes:
            self.client.post("/-/control/resume", f"NodeName={','.join(nodes)}")

    def apply(
        self, proposal_id: str, changes: Sequence[Change], sink: StepSink, reclaim: Sequence[str] = ()
    ) -> SideResult:
        """Drain, wait, set the full lists, resume, read back; undone on a failure."""
        if all(v == AFTER for v in self.status(changes).values()):
            return SideResult.NOOP
        leaving = self._leaving(changes)
        try:
            if leaving:
                sink("draining", {"proposal": proposal_id, "nodes": leaving})
                self.client.post("/-/control/drain", f'NodeName={",".join(leaving)} Reason="ibpool apply"')
                if not self._wait_drained(leaving):
                    self._resume(leaving)
                    sink("gave_up", {"nodes": leaving})
                    raise SideFailedError(
                        f"slurm: {', '.join(leaving)} still running jobs after "
                        f"{self.drain_deadline_seconds:g} s; resumed, nothing changed",
                        undone=True,
                    )
            sink("setting", {"partitions": {c.target: c.after for c in changes}})
            wrong = self._set(changes, "after")
            self._resume(leaving)
            sink("resumed", {"nodes": leaving})
        except SideFailedError:
            raise
        except HookError as exc:
            raise SideFailedError(f"slurm: {exc}", undone=self._undo(changes, leaving)) from exc
        if wrong:
            raise SideFailedError(
                f"slurm: read back differs for {', '.join(wrong)}", undone=self._undo(changes, leaving)
            )
        sink("verified", {"targets": [c.target for c in changes]})
        return SideResult.APPLIED

    def _undo(self, changes: Sequence[Change], leaving: Sequence[str]) -> bool:
        try:
            wrong = self._set(changes, "before")
            self._resume(leaving)
        except HookError:
            return False
        return not wrong

    def rollback(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> None:
        """Previous full lists, nodes resumed, read back."""
        steps = _recorded(recorded)
        if "draining" not in steps and "setting" not in steps:
            return
        if "gave_up" in steps:
            return
        if not self._undo(changes, self._leaving(changes)):
            raise SideFailedError("slurm: rollback could not restore the partitions", undone=False)
        sink("restored", {"proposal": proposal_id})

    def recover(
        self, proposal_id: str, changes: Sequence[Change], recorded: Recorded, sink: StepSink
    ) -> SideResult:
        """Partitions set: finish (resume, verify); otherwise undo what began."""
        steps = _recorded(recorded)
        if "gave_up" in steps:
            return SideResult.ROLLED_BACK
        status = self.status(changes)
        if "setting" in steps and all(v == AFTER for v in status.values()):
            self._resume(self._leaving(changes))
            sink("verified", {"targets": sorted(status), "recovered": True})
            return SideResult.APPLIED
        if not steps:
            return SideResult.NOOP if all(v == AFTER for v in status.values()) else SideResult.UNTOUCHED
        self.rollback(proposal_id, changes, recorded, sink)
        return SideResult.ROLLED_BACK
