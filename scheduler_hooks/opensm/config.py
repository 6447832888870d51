"""The OpenSM adapter's configuration: frozen, typed, parsed once; every error reported at once.

It is the `opensm:` section of the `ibpool apply` config; every key, in a full example:
docs/configuration.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from scheduler_hooks.errors import HookConfigError
from scheduler_hooks.opensm.targets import normalise_guid

_GUID = re.compile(r"0x[0-9a-fA-F]{1,16}")
_CA = re.compile(r"[A-Za-z0-9_]{1,64}")
_EMPTY: Mapping[str, str] = MappingProxyType({})
_NO_NODES: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True)
class DiagConfig:
    """How the diagnostics (smpquery, saquery, ibnetdiscover) run."""

    preload: Path | None = None
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    ca: str | None = None
    ca_port: int | None = None
    mad_timeout_ms: int | None = None
    command_timeout: float = 20.0
    concurrency: int = 4
    workdir: Path | None = None
    smpquery: str = "smpquery"
    saquery: str = "saquery"
    ibnetdiscover: str = "ibnetdiscover"


@dataclass(frozen=True)
class VerifyConfig:
    """Where and how long to look for the applied values on the fabric."""

    ports: str = "all"
    sample_size: int = 8
    path_pairs: int = 4
    timeout: float = 30.0
    interval: float = 0.2


@dataclass(frozen=True)
class OpenSMConfig:
    """The files OpenSM reads, how to signal it, where records go, and how to look at the fabric."""

    config_file: Path
    qos_policy_file: Path
    partitions_file: Path
    state_dir: Path
    pid_file: Path | None = None
    pid: int | None = None
    process_name: str | None = "opensm"
    log_file: Path | None = None
    node_name_pattern: str = r"^(\S+)"
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NO_NODES)
    diag: DiagConfig = field(default_factory=DiagConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "config") -> OpenSMConfig:
        """Build from a parsed YAML mapping; HookConfigError lists every problem (`source: key: ...`)."""
        reader = _Reader(source)
        known = {
            "config_file",
            "qos_policy_file",
            "partitions_file",
            "state_dir",
            "pid_file",
            "pid",
            "process_name",
            "log_file",
            "node_name_pattern",
            "nodes",
            "diag",
            "verify",
        }
        reader.unknown(data, known, "opensm")
        paths = {k: reader.path(data, k, required=True) for k in ("config_file", "qos_policy_file")}
        partitions = reader.path(data, "partitions_file", required=True)
        state_dir = reader.path(data, "state_dir", required=True)
        pid_file = reader.path(data, "pid_file")
        pid = reader.integer(data, "pid", 1, 2**22)
        if pid_file is None and pid is None:
            reader.problems.append(f"{source}: opensm: one of pid_file or pid is required")
        pattern = reader.string(data, "node_name_pattern") or r"^(\S+)"
        try:
            if re.compile(pattern).groups < 1:
                reader.problems.append(f"{source}: opensm.node_name_pattern: needs one capture group")
        except re.error as exc:
            reader.problems.append(f"{source}: opensm.node_name_pattern: {exc}")
        process_name = data.get("process_name", "opensm")
        if process_name is not None and not isinstance(process_name, str):
            reader.problems.append(f"{source}: opensm.process_name: a string or null")
            process_name = "opensm"
        diag = _diag(reader, data.get("diag") or {})
        verify = _verify(reader, data.get("verify") or {})
        nodes = _nodes(reader, data.get("nodes") or {})
        if reader.problems:
            raise HookConfigError(reader.problems)
        assert paths["config_file"] and paths["qos_policy_file"] and partitions and state_dir
        return cls(
            config_file=paths["config_file"],
            qos_policy_file=paths["qos_policy_file"],
            partitions_file=partitions,
            state_dir=state_dir,
            pid_file=pid_file,
            pid=pid,
            process_name=process_name,
            log_file=reader.path(data, "log_file"),
            node_name_pattern=pattern,
            nodes=nodes,
            diag=diag,
            verify=verify,
        )


class _Reader:
    """Collects problems while reading typed values out of a mapping."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

    def unknown(self, data: Mapping[str, Any], known: set[str], where: str) -> None:
        if not isinstance(data, Mapping):
            self.problems.append(f"{self.source}: {where}: must be a mapping")
            return
        for key in sorted(set(data) - known):
            self.problems.append(f"{self.source}: {where}.{key}: unknown key")

    def path(
        self, data: Mapping[str, Any], key: str, required: bool = False, where: str = "opensm"
    ) -> Path | None:
        value = data.get(key)
        if value is None:
            if required:
                self.problems.append(f"{self.source}: {where}.{key}: required")
            return None
        if not isinstance(value, str) or not value.startswith("/"):
            self.problems.append(f"{self.source}: {where}.{key}: must be an absolute path")
            return None
        return Path(value)

    def string(self, data: Mapping[str, Any], key: str, where: str = "opensm") -> str | None:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            self.problems.append(f"{self.source}: {where}.{key}: must be a string")
            return None
        return value

    def integer(
        self, data: Mapping[str, Any], key: str, low: int, high: int, where: str = "opensm"
    ) -> int | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.problems.append(f"{self.source}: {where}.{key}: an integer {low}-{high}")
            return None
        return value

    def number(self, data: Mapping[str, Any], key: str, default: float, where: str) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.problems.append(f"{self.source}: {where}.{key}: a positive number")
            return default
        return float(value)


def _diag(reader: _Reader, data: Mapping[str, Any]) -> DiagConfig:
    where = "opensm.diag"
    known = {"preload", "env", "ca", "port", "mad_timeout_ms", "command_timeout", "concurrency", "workdir"}
    known |= {"smpquery", "saquery", "ibnetdiscover"}
    reader.unknown(data, known, where)
    if not isinstance(data, Mapping):
        return DiagConfig()
    env = data.get("env") or {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        reader.problems.append(f"{reader.source}: {where}.env: a mapping of strings to strings")
        env = {}
    ca = reader.string(data, "ca", where)
    if ca is not None and not _CA.fullmatch(ca):
        reader.problems.append(f"{reader.source}: {where}.ca: a device name like mlx5_0")
        ca = None
    programs = {k: reader.string(data, k, where) or k for k in ("smpquery", "saquery", "ibnetdiscover")}
    return DiagConfig(
        preload=reader.path(data, "preload", where=where),
        env=MappingProxyType(dict(env)),
        ca=ca,
        ca_port=reader.integer(data, "port", 1, 254, where),
        mad_timeout_ms=reader.integer(data, "mad_timeout_ms", 1, 600_000, where),
        command_timeout=reader.number(data, "command_timeout", 20.0, where),
        concurrency=reader.integer(data, "concurrency", 1, 8, where) or 4,
        workdir=reader.path(data, "workdir", where=where),
        **programs,
    )


def _verify(reader: _Reader, data: Mapping[str, Any]) -> VerifyConfig:
    where = "opensm.verify"
    reader.unknown(data, {"ports", "sample_size", "path_pairs", "timeout", "interval"}, where)
    if not isinstance(data, Mapping):
        return VerifyConfig()
    ports = data.get("ports", "all")
    if ports not in ("all", "sample"):
        reader.problems.append(f"{reader.source}: {where}.ports: all or sample")
        ports = "all"
    return VerifyConfig(
        ports=ports,
        sample_size=reader.integer(data, "sample_size", 1, 100_000, where) or 8,
        path_pairs=reader.integer(data, "path_pairs", 1, 1000, where) or 4,
        timeout=reader.number(data, "timeout", 30.0, where),
        interval=reader.number(data, "interval", 0.2, where),
    )


def _nodes(reader: _Reader, data: Mapping[str, Any]) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(data, Mapping):
        reader.problems.append(f"{reader.source}: opensm.nodes: a mapping of node name to port GUIDs")
        return _NO_NODES
    nodes: dict[str, tuple[str, ...]] = {}
    for name, guids in data.items():
        items = guids if isinstance(guids, list) else [guids]
        if not isinstance(name, str) or not items:
            reader.problems.append(f"{reader.source}: opensm.nodes.{name}: a list of port GUIDs")
            continue
        # YAML reads an unquoted 0x... as an integer.
        texts = [f"0x{g:x}" if isinstance(g, int) and not isinstance(g, bool) else g for g in items]
        bad = [g for g in texts if not isinstance(g, str) or not _GUID.fullmatch(g)]
        if bad:
            reader.problems.append(f"{reader.source}: opensm.nodes.{name}: not port GUIDs: {bad}")
            continue
        nodes[name] = tuple(sorted(normalise_guid(g) for g in texts))
    return MappingProxyType(nodes)
