"""Targets <-> file texts: the value a target has in the files, and the files after a set of changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler_hooks.opensm import conffile, partitions, policy
from scheduler_hooks.opensm.targets import (
    Kind,
    Member,
    Target,
    ValueFormatError,
    format_members,
    format_sl2vl,
    format_vlarb,
    members_from_ports,
    parse_members,
    parse_sl,
    parse_sl2vl,
    parse_vlarb,
    render_vlarb,
)

Names = Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Texts:
    """The three files' contents (None: the file does not exist)."""

    config: str
    policy: str | None
    partitions: str | None


def resolve(members: Sequence[Member], names: Names) -> dict[str, str]:
    """Port GUID -> membership; ValueFormatError names every member that is no known node or GUID."""
    ports: dict[str, str] = {}
    unknown: list[str] = []
    known_guids = {g for guids in names.values() for g in guids}
    for member in members:
        if member.is_guid:
            if known_guids and member.ident not in known_guids:
                unknown.append(f"port GUID {member.ident} is not a CA port on the fabric")
            ports[member.ident] = member.membership
        elif member.ident in names:
            ports.update({g: member.membership for g in names[member.ident]})
        else:
            unknown.append(f"node {member.ident!r} is not known (no CA port with that name)")
    if unknown:
        raise ValueFormatError(unknown)
    return ports


def file_value(target: Target, texts: Texts, names: Names, port_names: Mapping[str, str]) -> str | None:
    """The canonical value of `target` in the files (None: the files do not set it).

    `port_names` maps `node description/Pn` to the port GUID, for port groups listed by port-name.
    Raises ValueError (PolicyError, PartitionError, ValueFormatError) when the files cannot be read for it.
    """
    if target.kind in conffile.BASE_KEYS:
        options = conffile.parse_options(texts.config)
        value = options.get(conffile.BASE_KEYS[target.kind])
        if not conffile.is_set(value):
            return None
        assert value is not None
        if target.kind is Kind.SL2VL:
            return format_sl2vl(parse_sl2vl(value))
        return format_vlarb(parse_vlarb(value))
    if target.kind is Kind.PARTITION_MEMBERS:
        statement = partitions.find(partitions.parse_partitions(texts.partitions or ""), target.pool)
        if statement is None:
            raise partitions.PartitionError(f"no partition named {target.pool!r}")
        if partitions.keywords(statement):
            raise partitions.PartitionError(f"partition {target.pool!r} has keyword members")
        return format_members(members_from_ports(partitions.port_memberships(statement), names))
    doc = policy.parse_policy(texts.policy or "")
    group = doc.port_group(target.pool)
    if group is None:
        raise policy.PolicyError(f"no port-group named {target.pool!r}")
    if target.kind is Kind.GROUP_SL:
        sl = doc.group_sl(target.pool)
        return None if sl is None else str(sl)
    return format_members(members_from_ports(group_ports(group, port_names), names))


def group_ports(group: policy.Block, port_names: Mapping[str, str]) -> dict[str, str]:
    """Port GUID -> "full" for the port-guid and port-name entries of a port group."""
    dynamic = [e.key for e in group.entries if e.key in policy.DYNAMIC_KEYS]
    if dynamic:
        raise policy.PolicyError(f"port-group {group.name!r} selects ports by {', '.join(dynamic)}")
    ports = {f"0x{int(g, 16):016x}": "full" for g in group.values("port-guid")}
    for name in group.values("port-name"):
        if name not in port_names:
            raise policy.PolicyError(f"port-group {group.name!r}: port-name {name!r} is not on the fabric")
        ports[port_names[name]] = "full"
    return ports


def render(changes: Sequence[tuple[Target, str]], texts: Texts, names: Names) -> Texts:
    """The files with every change made (ValueError when a change cannot be rendered)."""
    options = conffile.parse_options(texts.config)
    updates: dict[str, str] = {}
    out = texts
    for target, after in changes:
        if target.kind in conffile.BASE_KEYS:
            value = (
                format_sl2vl(parse_sl2vl(after))
                if target.kind is Kind.SL2VL
                else render_vlarb(parse_vlarb(after))
            )
            updates.update({key: value for key in conffile.managed_keys(target.kind, options)})
        elif target.kind is Kind.PARTITION_MEMBERS:
            ports = resolve(parse_members(after), names)
            out = replace(out, partitions=partitions.set_members(out.partitions or "", target.pool, ports))
        elif target.kind is Kind.GROUP_MEMBERS:
            guids = sorted(resolve(parse_members(after, memberships=False), names))
            out = replace(out, policy=policy.set_group_members(out.policy or "", target.pool, guids))
        else:
            out = replace(out, policy=policy.set_group_sl(out.policy or "", target.pool, parse_sl(after)))
    if updates:
        out = replace(out, config=conffile.set_options(out.config, updates))
    return out
