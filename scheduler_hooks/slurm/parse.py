"""Parses what sinfo, scontrol and squeue print into plain records (nothing here runs a command)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from foundation.hostlist import expand_hostlist
from scheduler_hooks.errors import LiveStateError

# The formats the adapter asks for; the parsers below read exactly these.
SINFO_PARTITIONS = "%R %D %N"
SQUEUE_JOBS = "%A %t %N"

_BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
_DOWN_STATES = frozenset({"DOWN", "FAIL", "FAILING", "ERROR", "FUTURE"})
# sinfo/scontrol mark node states with a trailing symbol (`*` not responding, `~` powered off, ...).
_STATE_MARKS = "*~#!%$@^-"
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


@dataclass(frozen=True)
class NodeInfo:
    """One node as `scontrol -o show nodes` describes it."""

    name: str
    state: str
    flags: frozenset[str]
    reason: str
    partitions: tuple[str, ...]

    @property
    def draining(self) -> bool:
        """The DRAIN flag is set (draining or drained)."""
        return "DRAIN" in self.flags

    @property
    def busy(self) -> bool:
        """Jobs are allocated on it or still completing."""
        return self.state in _BUSY_STATES or "COMPLETING" in self.flags

    @property
    def down(self) -> bool:
        """Down, failed or not in service, so it runs nothing and is not ours to drain or resume."""
        return self.state in _DOWN_STATES or bool({"FAIL", "MAINT", "REBOOT_REQUESTED"} & self.flags)


@dataclass(frozen=True)
class Job:
    """One job squeue lists: id, compact state (R, PD, CG, ...) and the nodes it holds."""

    job_id: str
    state: str
    nodes: tuple[str, ...]


def parse_partitions(text: str) -> dict[str, tuple[str, ...]]:
    """`sinfo -h -a -o '%R %D %N'` -> partition -> member nodes, trusting the node count sinfo prints.

    sinfo may split a partition over several lines; they are merged. A line whose count and list disagree
    is refused (LiveStateError) rather than guessed at.
    """
    members: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) not in (2, 3) or not parts[1].isdigit():
            raise LiveStateError(f"sinfo line {number}: expected 'PARTITION COUNT NODES', got {line!r}")
        name, count = parts[0], int(parts[1])
        try:
            nodes = expand_hostlist(parts[2]) if len(parts) == 3 else []
        except ValueError as exc:
            raise LiveStateError(f"sinfo line {number}: {exc}") from None
        if len(nodes) != count:
            raise LiveStateError(
                f"sinfo line {number}: partition {name} counts {count} nodes but lists {nodes}"
            )
        members.setdefault(name, []).extend(nodes)
    return {name: tuple(dict.fromkeys(nodes)) for name, nodes in members.items()}


def _fields(line: str) -> dict[str, str]:
    """`Key=value Key=value with spaces ...` of one `scontrol -o` line; a value runs to the next key."""
    keys = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(line)
        out.setdefault(match.group(1), line[match.end() : end].strip())
    return out


def split_state(text: str) -> tuple[str, frozenset[str]]:
    """`MIXED+DRAIN` -> ("MIXED", {"DRAIN"}); `IDLE*` -> ("IDLE", {"NOT_RESPONDING"})."""
    tokens = text.upper().split("+")
    flags: set[str] = set()
    cleaned: list[str] = []
    for token in tokens:
        stripped = token.rstrip(_STATE_MARKS)
        if "*" in token[len(stripped) :]:
            flags.add("NOT_RESPONDING")
        cleaned.append(stripped)
    return cleaned[0], frozenset(flags | set(cleaned[1:]))


def parse_nodes(text: str) -> dict[str, NodeInfo]:
    """`scontrol -a -o show nodes` -> node name -> NodeInfo (a node in no partition has none)."""
    nodes: dict[str, NodeInfo] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = _fields(line)
        name, state_text = fields.get("NodeName", ""), fields.get("State", "")
        if not name or not state_text:
            raise LiveStateError(f"scontrol show nodes line {number}: no NodeName or State in {line[:80]!r}")
        state, flags = split_state(state_text)
        partitions = tuple(p for p in fields.get("Partitions", "").split(",") if p)
        nodes[name] = NodeInfo(name, state, flags, fields.get("Reason", ""), partitions)
    return nodes


def parse_jobs(text: str) -> list[Job]:
    """`squeue -h -o '%A %t %N'` -> jobs (a pending job holds no nodes)."""
    jobs: list[Job] = []
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (2, 3):
            raise LiveStateError(f"squeue line {number}: expected 'JOBID STATE NODES', got {line!r}")
        try:
            nodes = tuple(expand_hostlist(parts[2])) if len(parts) == 3 else ()
        except ValueError as exc:
            raise LiveStateError(f"squeue line {number}: {exc}") from None
        jobs.append(Job(parts[0], parts[1], nodes))
    return jobs
