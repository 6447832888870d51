"""From changes to a plan: which targets are Slurm's, what is wrong, what is stale, what to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from proposals.targets import SLURM_NODES, format_node_list, parse_node_list, parse_target, sorted_nodes
from scheduler_hooks.slurm.parse import NodeInfo
from scheduler_hooks.slurm.record import PartitionPlan


class ChangeLike(Protocol):
    """A change as the proposal format has it (proposals.model.Change fits)."""

    @property
    def target(self) -> str: ...

    @property
    def before(self) -> str: ...

    @property
    def after(self) -> str: ...


def partition_of(target: str) -> str | None:
    """The partition a `slurm.partition.<pool>.nodes` target names; None for any other target."""
    try:
        parsed = parse_target(target)
    except ValueError:
        return None
    return parsed.pool if parsed.family == SLURM_NODES else None


def node_value(nodes: Sequence[str]) -> str:
    """A target value: the full node list, unique, natural order, comma-separated."""
    return format_node_list(nodes)


def check_changes(
    changes: Sequence[ChangeLike],
    partitions: Mapping[str, Sequence[str]],
    nodes: Mapping[str, NodeInfo],
    allow_empty: bool,
) -> list[str]:
    """Every problem with `changes` against the live partitions and nodes (empty list: none)."""
    problems: list[str] = []
    seen: set[str] = set()
    for index, change in enumerate(changes):
        where = f"changes[{index}] ({change.target})"
        partition = partition_of(change.target)
        if partition is None:
            problems.append(f"{where}: not a slurm.partition.<pool>.nodes target")
            continue
        if partition in seen:
            problems.append(f"{where}: partition {partition} is changed more than once")
        seen.add(partition)
        if partition not in partitions:
            problems.append(f"{where}: no partition {partition} in Slurm")
        for key in ("before", "after"):
            try:
                names = parse_node_list(getattr(change, key))
            except ValueError as exc:
                problems.append(f"{where}.{key}: {exc}")
                continue
            unknown = [name for name in names if name not in nodes]
            if unknown:
                problems.append(f"{where}.{key}: no such node(s) in Slurm: {','.join(unknown)}")
            if key == "after" and not names and not allow_empty:
                problems.append(f"{where}.after: would leave partition {partition} empty (not allowed)")
    return problems


@dataclass(frozen=True)
class Plan:
    """What an apply would do: partitions to change, and targets whose live value is neither side."""

    plans: tuple[PartitionPlan, ...]
    stale: tuple[str, ...]
    done: tuple[str, ...]


def plan_changes(changes: Sequence[ChangeLike], partitions: Mapping[str, Sequence[str]]) -> Plan:
    """Compare each (checked) change with the live node list: already done, to do, or stale."""
    plans: list[PartitionPlan] = []
    stale: list[str] = []
    done: list[str] = []
    for change in changes:
        partition = partition_of(change.target)
        if partition is None:
            raise ValueError(f"{change.target} is not a Slurm partition target")
        live = frozenset(partitions.get(partition, ()))
        before, after = frozenset(parse_node_list(change.before)), frozenset(parse_node_list(change.after))
        if live == after:
            done.append(change.target)
        elif live != before:
            stale.append(change.target)
        else:
            plans.append(PartitionPlan(partition, tuple(sorted_nodes(before)), tuple(sorted_nodes(after))))
    return Plan(tuple(sorted(plans, key=lambda p: p.partition)), tuple(stale), tuple(done))
