"""Strict validation of a change set, every problem at once, before anything is written.

OpenSM does not refuse a malformed weight (it pushes a mangled table), so nothing reaches its files
unless: the target is known and appears once; the value has its exact form (VL 0-14 and below
qos_max_vls, weight 0-255, each VL once, 16 SL-to-VL entries, SL 0-15, known members); QoS is on; the
files ibpool edits are the ones OpenSM reads; the pool's port group or partition exists in a form
ibpool manages; and the rendered files read back as the requested values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler_hooks.opensm import conffile, partitions, policy
from scheduler_hooks.opensm.config import OpenSMConfig
from scheduler_hooks.opensm.model import ChangeLike, Problem
from scheduler_hooks.opensm.render import Names, Texts, file_value, render, resolve
from scheduler_hooks.opensm.targets import (
    MEMBER_KINDS,
    Kind,
    Target,
    ValueFormatError,
    canonical,
    parse_members,
    parse_sl,
    parse_sl2vl,
    parse_target,
    parse_vlarb,
)

GLOBAL = "opensm"


@dataclass(frozen=True)
class Context:
    """What validation looks at: the config, the files' texts and the fabric's node names."""

    config: OpenSMConfig
    texts: Texts | None
    read_error: str | None
    names: Names
    port_names: Mapping[str, str]
    topology_error: str | None


def validate(changes: Sequence[ChangeLike], context: Context) -> list[Problem]:
    """Every problem with `changes` in `context` (empty: safe to render and write)."""
    problems: list[Problem] = []
    parsed: list[tuple[Target, str]] = []
    seen: set[Target] = set()
    if context.texts is None:
        problems.append(Problem(GLOBAL, context.read_error or "cannot read the OpenSM files"))
    options = conffile.parse_options(context.texts.config) if context.texts else {}
    max_vls = conffile.max_vls(options)
    for change in changes:
        try:
            target = parse_target(change.target)
        except ValueError as exc:
            problems.append(Problem(change.target, str(exc)))
            continue
        if target in seen:
            problems.append(Problem(change.target, "appears more than once in the change set"))
        seen.add(target)
        if not isinstance(change.after, str):
            problems.append(Problem(change.target, "after must be a string"))
            continue
        value_problems = _value(target, change.after, max_vls)
        problems += [Problem(change.target, p) for p in value_problems]
        if context.texts is not None:
            problems += [Problem(change.target, p) for p in _setting(target, change.after, context, options)]
        if not value_problems:
            parsed.append((target, change.after))
    if problems or context.texts is None:
        return problems
    return _round_trip(parsed, context)


def _value(target: Target, value: str, max_vls: int) -> list[str]:
    try:
        if target.kind in (Kind.VLARB_HIGH, Kind.VLARB_LOW):
            parse_vlarb(value, max_vls)
        elif target.kind is Kind.SL2VL:
            parse_sl2vl(value, max_vls)
        elif target.kind is Kind.GROUP_SL:
            parse_sl(value)
        else:
            parse_members(value, memberships=target.kind is Kind.PARTITION_MEMBERS)
    except ValueFormatError as exc:
        return exc.problems
    return []


def _same_file(configured: str | None, ours: Path) -> bool:
    if not conffile.is_set(configured):
        return True
    assert configured is not None
    return Path(configured).resolve() == ours.resolve()


def _setting(target: Target, after: str, context: Context, options: Mapping[str, str]) -> list[str]:
    """Problems with the files and the fabric for this target (its value already parsed)."""
    texts = context.texts
    assert texts is not None
    out: list[str] = []
    if target.kind is not Kind.PARTITION_MEMBERS and options.get("qos", "FALSE").upper() != "TRUE":
        out.append("QoS is off in opensm.conf (qos TRUE is needed)")
    if target.kind in (Kind.GROUP_SL, Kind.GROUP_MEMBERS):
        if not _same_file(options.get("qos_policy_file"), context.config.qos_policy_file):
            out.append(f"opensm.conf reads the QoS policy from {options['qos_policy_file']}")
        out += _policy(target, texts.policy)
    if target.kind is Kind.PARTITION_MEMBERS:
        if not _same_file(options.get("partition_config_file"), context.config.partitions_file):
            out.append(f"opensm.conf reads partitions from {options['partition_config_file']}")
        out += _partition(target, texts.partitions)
    if target.kind in MEMBER_KINDS:
        if context.topology_error and not context.names:
            out.append(f"node names cannot be resolved: {context.topology_error}")
        else:
            try:
                resolve(parse_members(after), context.names)
            except ValueFormatError as exc:
                out += exc.problems
    return out


def _policy(target: Target, text: str | None) -> list[str]:
    if text is None:
        return ["the QoS policy file does not exist"]
    try:
        doc = policy.parse_policy(text)
    except policy.PolicyError as exc:
        return [f"QoS policy file: {exc}"]
    group = doc.port_group(target.pool)
    if group is None:
        return [f"no port-group named {target.pool!r} in the QoS policy file"]
    out: list[str] = []
    if doc.default_sl() is None:
        out.append("the QoS policy has no DEFAULT qos-level (OpenSM rejects such a policy)")
    dynamic = [e.key for e in group.entries if e.key in policy.DYNAMIC_KEYS]
    if target.kind is Kind.GROUP_MEMBERS and dynamic:
        out.append(f"port-group {target.pool!r} also selects ports by {', '.join(dynamic)}")
    return out


def _partition(target: Target, text: str | None) -> list[str]:
    if text is None:
        return ["the partitions file does not exist"]
    try:
        statement = partitions.find(partitions.parse_partitions(text), target.pool)
    except partitions.PartitionError as exc:
        return [f"partitions file: {exc}"]
    if statement is None:
        return [f"no partition named {target.pool!r} in the partitions file"]
    out: list[str] = []
    if statement.members is None or partitions.keywords(statement):
        out.append(f"partition {target.pool!r} lists members other than port GUIDs")
    if statement.pkey is None:
        out.append(f"partition {target.pool!r} has no explicit pkey (needed to verify it)")
    return out


def _round_trip(parsed: Sequence[tuple[Target, str]], context: Context) -> list[Problem]:
    """Render the files and read every target back from them."""
    texts = context.texts
    assert texts is not None
    try:
        rendered = render(parsed, texts, context.names)
    except (ValueError, OSError) as exc:
        return [Problem(GLOBAL, f"cannot render the changes: {exc}")]
    problems: list[Problem] = []
    for target, after in parsed:
        want = canonical(target, after, context.names)
        try:
            got = file_value(target, rendered, context.names, context.port_names)
        except ValueError as exc:
            problems.append(Problem(target.name, f"rendered files cannot be read back: {exc}"))
            continue
        if got != want:
            problems.append(Problem(target.name, f"rendered files read back as {got!r}, not {want!r}"))
    return problems
