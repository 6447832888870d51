"""The live state: the files as they are now, the fabric's ports and names, and per-target live values."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from scheduler_hooks.errors import HookError, LiveStateError
from scheduler_hooks.opensm import partitions, policy, verify
from scheduler_hooks.opensm.config import OpenSMConfig
from scheduler_hooks.opensm.fabric import FabricReader, PortRef, Topology, membership, sample
from scheduler_hooks.opensm.files import read_text
from scheduler_hooks.opensm.model import LiveValue
from scheduler_hooks.opensm.render import Texts, file_value, group_ports, resolve
from scheduler_hooks.opensm.targets import (
    TABLE_KINDS,
    Kind,
    Target,
    format_members,
    format_vlarb,
    members_from_ports,
    parse_members,
)
from scheduler_hooks.opensm.validate import Context

log = logging.getLogger(__name__)
T = TypeVar("T")
TOPOLOGY_TTL = 60.0


@dataclass(frozen=True)
class Expected:
    """What verification should find for one target (`previous`: the value it replaces, if known)."""

    target: Target
    value: str
    previous: str | None


class LiveState:
    """Reads the files and the fabric for the adapter; caches the topology for a minute."""

    def __init__(self, config: OpenSMConfig, reader: FabricReader) -> None:
        self.config = config
        self.reader = reader
        self._topology: tuple[float, Topology] | None = None

    def topology(self, refresh: bool = False) -> Topology:
        """The fabric's ports and node names (one ibnetdiscover, cached)."""
        now = time.monotonic()
        if refresh or self._topology is None or now - self._topology[0] > TOPOLOGY_TTL:
            topology = self.reader.topology(self.config.node_name_pattern, self.config.nodes)
            self._topology = (now, topology)
        return self._topology[1]

    def texts(self) -> Texts:
        """The three files now; LiveStateError when opensm.conf cannot be read."""
        try:
            config = self.config.config_file.read_text()
            return Texts(
                config, read_text(self.config.qos_policy_file), read_text(self.config.partitions_file)
            )
        except OSError as exc:
            raise LiveStateError(f"cannot read the OpenSM files: {exc}") from exc

    def context(self, need_fabric: bool) -> Context:
        """What validation needs; the fabric is asked only when `need_fabric`."""
        texts: Texts | None = None
        read_error: str | None = None
        try:
            texts = self.texts()
        except LiveStateError as exc:
            read_error = str(exc)
        names, port_names, topology_error = dict(self.config.nodes), {}, None
        if need_fabric:
            try:
                topology = self.topology()
                names, port_names = dict(topology.names), dict(topology.port_names)
            except (HookError, ValueError) as exc:
                topology_error = str(exc)
        return Context(self.config, texts, read_error, names, port_names, topology_error)

    def file_value(self, target: Target, texts: Texts) -> str | None:
        """The target's canonical value in `texts`; LiveStateError when they cannot be read for it."""
        topology = self.topology() if target.kind not in TABLE_KINDS else None
        names = topology.names if topology else self.config.nodes
        port_names = topology.port_names if topology else {}
        try:
            return file_value(target, texts, names, port_names)
        except ValueError as exc:
            raise LiveStateError(f"{target}: {exc}") from exc

    def sources(self, target: Target) -> LiveValue:
        """The target's value in the files and on the fabric."""
        texts = self.texts()
        from_file = self.file_value(target, texts)
        by_port = self._fabric(target, texts)
        values = set(by_port.values())
        fabric = values.pop() if len(values) == 1 else None
        return LiveValue(target.name, from_file, fabric, by_port)

    def _fabric(self, target: Target, texts: Texts) -> dict[str, str]:
        if target.kind is Kind.GROUP_MEMBERS:
            return {}
        topology = self.topology()
        if target.kind in TABLE_KINDS:
            ports = self.table_ports(topology)
            if target.kind is Kind.SL2VL:
                rows = self.reader.each(ports, self.reader.sl2vl)
                return {str(p): _or_raise(a, p, verify.sl2vl_value) for p, a in zip(ports, rows, strict=True)}
            high = target.kind is Kind.VLARB_HIGH
            tables = self.reader.each(ports, self.reader.vlarb)
            return {
                str(p): _or_raise(a, p, lambda t: format_vlarb(t.high if high else t.low))
                for p, a in zip(ports, tables, strict=True)
            }
        if target.kind is Kind.GROUP_SL:
            members = self.group_ports(target.pool, texts, topology)
            if len(members) < 2:
                return {}
            sl = self.reader.path_sl(members[0], members[1])
            return {f"{members[0]} -> {members[1]}": "no path" if sl is None else str(sl)}
        pkey = self.partition_pkey(target.pool, texts)
        ports = list(topology.ca_ports)
        keys = self.reader.each(ports, self.reader.pkeys)
        held: dict[str, str] = {}
        guid_of = {ref: guid for guid, ref in topology.guid_port.items()}
        for port, answer in zip(ports, keys, strict=True):
            kind = _or_raise(answer, port, lambda keys: membership(keys, pkey))
            if kind != "none":
                held[guid_of[port]] = kind
        return {"all CA ports": format_members(members_from_ports(held, topology.names))}

    def table_ports(self, topology: Topology) -> list[PortRef]:
        """The switch and CA ports tables are read and verified on."""
        verify_config = self.config.verify
        return sample(topology.switch_ports, verify_config) + sample(topology.ca_ports, verify_config)

    def group_ports(self, pool: str, texts: Texts, topology: Topology) -> list[PortRef]:
        """The CA ports of a port group, by the policy file in `texts`."""
        group = policy.parse_policy(texts.policy or "").port_group(pool)
        if group is None:
            raise LiveStateError(f"no port-group named {pool!r}")
        return sorted(topology.ports_of(group_ports(group, topology.port_names)))

    def partition_pkey(self, pool: str, texts: Texts) -> int:
        """The pkey of the pool's partition."""
        statement = partitions.find(partitions.parse_partitions(texts.partitions or ""), pool)
        if statement is None or statement.pkey is None:
            raise LiveStateError(f"partition {pool!r} is missing or has no pkey")
        return statement.pkey

    def checks(self, expected: Sequence[Expected], texts: Texts) -> list[verify.Check]:
        """The fabric checks that show `expected` took effect, given the files now in place."""
        topology = self.topology()
        out: list[verify.Check] = []
        for item in expected:
            target = item.target
            if target.kind in TABLE_KINDS:
                out += verify.table_checks(target, item.value, self.table_ports(topology))
            elif target.kind is Kind.GROUP_SL:
                members = self.group_ports(target.pool, texts, topology)
                pairs = verify.path_pairs(members, self.config.verify.path_pairs)
                out += verify.path_checks(target, item.value, pairs)
            elif target.kind is Kind.GROUP_MEMBERS:
                out += self._member_path_checks(item, texts, topology)
            else:
                out += self._pkey_checks(item, texts, topology)
        return out

    def _ports(self, value: str | None, topology: Topology, memberships: bool) -> dict[PortRef, str]:
        if value is None:
            return {}
        ports = resolve(parse_members(value, memberships), topology.names)
        return {topology.guid_port[g]: m for g, m in ports.items() if g in topology.guid_port}

    def _member_path_checks(self, item: Expected, texts: Texts, topology: Topology) -> list[verify.Check]:
        sl = policy.parse_policy(texts.policy or "").group_sl(item.target.pool)
        now = sorted(self._ports(item.value, topology, memberships=False))
        before = self._ports(item.previous, topology, memberships=False)
        added = [p for p in now if p not in before] if item.previous is not None else now
        pairs = [(port, next(o for o in now if o != port)) for port in added if len(now) > 1]
        if sl is None:
            return []
        return verify.path_checks(item.target, str(sl), pairs[: self.config.verify.path_pairs])

    def _pkey_checks(self, item: Expected, texts: Texts, topology: Topology) -> list[verify.Check]:
        pkey = self.partition_pkey(item.target.pool, texts)
        want = {p: "full" if m == "both" else m for p, m in self._ports(item.value, topology, True).items()}
        for port in self._ports(item.previous, topology, True):
            want.setdefault(port, "none")
        return verify.pkey_checks(item.target, pkey, want)


def _or_raise(answer: T | Exception, port: PortRef, extract: Callable[[T], str]) -> str:
    if isinstance(answer, Exception):
        raise LiveStateError(f"cannot read {port}: {answer}") from answer
    return extract(answer)
