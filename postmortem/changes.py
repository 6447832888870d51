"""Changes as people read them: node lists in Slurm hostlist notation, the moved nodes named.

A partition change (`slurm.partition.<pool>.nodes`) lists its nodes before and after as hostlists
(`node[0001-0004,0009-0012]`) with the nodes it adds and removes; the changes of one proposal that take
nodes from one pool and give them to another read as one move (`2 nodes node[0013-0014] llm -> recsys`).
Other targets (VL arbitration tables, SL maps) read `target before -> after`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from foundation.hostlist import compress_hostlist
from proposals import targets


@dataclass(frozen=True)
class NodeChange:
    """One partition's members before and after, and the difference."""

    pool: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True)
class NodeMove:
    """Nodes that left one pool for another in the same proposal."""

    nodes: tuple[str, ...]
    source: str
    dest: str

    def describe(self) -> str:
        """`2 nodes node[0013-0014] llm -> recsys`."""
        count = len(self.nodes)
        return f"{count} node{'s' if count != 1 else ''} {hostlist(self.nodes)} {self.source} -> {self.dest}"


def hostlist(names: Sequence[str]) -> str:
    """Slurm hostlist notation (`-` for none); names that cannot be compressed are joined as they are."""
    if not names:
        return "-"
    try:
        return compress_hostlist(names)
    except ValueError:
        return ",".join(names)


def _names(value: str) -> tuple[str, ...]:
    try:
        return targets.parse_node_list(value)
    except ValueError:
        return tuple(n for n in value.split(",") if n)


def node_change(target: str, before: str, after: str) -> NodeChange | None:
    """The partition change of a `slurm.partition.<pool>.nodes` target (None for other targets)."""
    try:
        parsed = targets.parse_target(target)
    except ValueError:
        return None
    if parsed.family != targets.SLURM_NODES:
        return None
    old, new = _names(before), _names(after)
    added = tuple(targets.sorted_nodes(set(new) - set(old)))
    removed = tuple(targets.sorted_nodes(set(old) - set(new)))
    return NodeChange(parsed.pool or "", old, new, added, removed)


def moves(changes: Sequence[tuple[str, str, str]]) -> list[NodeMove]:
    """Nodes removed from one partition and added to another by the same changes."""
    parts = [c for c in (node_change(*change) for change in changes) if c is not None]
    out = []
    for dest in parts:
        for source in parts:
            moved = tuple(n for n in dest.added if n in source.removed)
            if moved and source.pool != dest.pool:
                out.append(NodeMove(moved, source.pool, dest.pool))
    return out


def describe(changes: Sequence[tuple[str, str, str]], limit: int = 200) -> str:
    """One line: the node moves, then the other targets as `target before -> after`."""
    parts = [m.describe() for m in moves(changes)]
    parts += [f"{t} {b or '-'} -> {a or '-'}" for t, b, a in changes if node_change(t, b, a) is None]
    text = "; ".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."
