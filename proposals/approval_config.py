"""The approval policy file: auto-approval bounds per kind and blast-radius limits, as frozen config.

Kinds the file does not list are never auto-approved; auto-approval covers VL arbitration weights (never
`opensm.sl2vl`) and port group SLs only; the limits bind every approval, people's and policies' alike.
The format, in a full example: docs/configuration.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from proposals.errors import ApprovalConfigError
from proposals.targets import MAX_SL, MAX_WEIGHT

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class BlastRadius:
    """Limits that refuse an unsafe plan whoever approves it."""

    max_nodes_moved_per_hour: int = 8
    max_pool_share_moved: float = 0.5
    max_weight_change_per_step: int = MAX_WEIGHT  # no limit unless a policy file sets one


@dataclass(frozen=True)
class VlWeightBounds:
    """Auto-approve `set_vl_weights` when no VL weight moves by more than this (and none goes to 0)."""

    max_weight_change_per_vl: int


@dataclass(frozen=True)
class MoveNodesBounds:
    """Auto-approve `move_nodes` moving at most this many nodes; one that takes nodes back by reclaim
    (requeueing the jobs on them) only with `reclaims`."""

    max_nodes: int
    reclaims: bool = False


@dataclass(frozen=True)
class PortGroupBounds:
    """Auto-approve `set_port_group` moving port groups to these SLs only."""

    allowed_sls: frozenset[int]


@dataclass(frozen=True)
class AutoApprove:
    """Bounds per kind; None means the kind is never auto-approved."""

    set_vl_weights: VlWeightBounds | None = None
    move_nodes: MoveNodesBounds | None = None
    set_port_group: PortGroupBounds | None = None

    def covers(self, kind: str) -> bool:
        """Whether this policy auto-approves proposals of `kind` at all."""
        return getattr(self, kind, None) is not None


@dataclass(frozen=True)
class ApprovalConfig:
    """A parsed approval policy file."""

    name: str | None = None
    auto_approve: AutoApprove = field(default_factory=AutoApprove)
    limits: BlastRadius = field(default_factory=BlastRadius)

    @property
    def who(self) -> str:
        """How this policy's decisions are recorded in the audit log."""
        return f"policy:{self.name}"


DEFAULT_CONFIG = ApprovalConfig()


def load_approval_config(path: Path) -> ApprovalConfig:
    """Read and check a policy file; ApprovalConfigError lists every problem with the file and key."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ApprovalConfigError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        raise ApprovalConfigError([f"{path}: not valid YAML: {exc}"]) from None
    return parse_approval_config(raw, str(path))


def parse_approval_config(raw: object, source: str) -> ApprovalConfig:
    """Check decoded YAML; ApprovalConfigError lists every problem as `source: key: message`."""
    problems: list[str] = []
    reader = _Reader(source, problems)
    top = reader.mapping("", raw if raw is not None else {}, ("name", "auto_approve", "limits"))
    config = ApprovalConfig()
    if top is not None:
        auto = _auto_approve(reader, top.get("auto_approve", {}))
        limits = _limits(reader, top.get("limits", {}))
        name = top.get("name")
        if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
            reader.bad("name", f"must be a name of letters, digits, '.', '_' or '-', got {name!r}")
            name = None
        if "name" not in top and top.get("auto_approve"):
            reader.bad("name", "missing: auto-approvals are recorded as policy:<name>")
        if auto is not None and limits is not None:
            config = ApprovalConfig(name, auto, limits)
    if problems:
        raise ApprovalConfigError(problems)
    return config


def _auto_approve(reader: _Reader, raw: object) -> AutoApprove | None:
    section = reader.mapping("auto_approve", raw, ("set_vl_weights", "move_nodes", "set_port_group"))
    if section is None:
        return None
    vl = move = group = None
    if "set_vl_weights" in section:
        fields = reader.mapping(
            "auto_approve.set_vl_weights", section["set_vl_weights"], ("max_weight_change_per_vl",), True
        )
        if fields is not None:
            value = reader.integer(
                "auto_approve.set_vl_weights.max_weight_change_per_vl", fields, 1, MAX_WEIGHT
            )
            vl = VlWeightBounds(value) if value is not None else None
    if "move_nodes" in section:
        keys = ("max_nodes", "reclaims")
        fields = reader.mapping("auto_approve.move_nodes", section["move_nodes"], keys, ("max_nodes",))
        if fields is not None:
            value = reader.integer("auto_approve.move_nodes.max_nodes", fields, 1, None)
            reclaims = reader.boolean("auto_approve.move_nodes.reclaims", fields)
            move = MoveNodesBounds(value, reclaims) if value is not None and reclaims is not None else None
    if "set_port_group" in section:
        fields = reader.mapping(
            "auto_approve.set_port_group", section["set_port_group"], ("allowed_sls",), True
        )
        if fields is not None and "allowed_sls" in fields:
            sls = reader.sl_list("auto_approve.set_port_group.allowed_sls", fields["allowed_sls"])
            group = PortGroupBounds(sls) if sls is not None else None
    return AutoApprove(vl, move, group)


def _limits(reader: _Reader, raw: object) -> BlastRadius | None:
    keys = ("max_nodes_moved_per_hour", "max_pool_share_moved", "max_weight_change_per_step")
    section = reader.mapping("limits", raw, keys)
    if section is None:
        return None
    default = BlastRadius()
    nodes = reader.integer("limits.max_nodes_moved_per_hour", section, 0, None)
    weight = reader.integer("limits.max_weight_change_per_step", section, 0, MAX_WEIGHT)
    share = section.get("max_pool_share_moved", default.max_pool_share_moved)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        reader.bad("limits.max_pool_share_moved", f"must be a number from 0 to 1, got {share!r}")
        return None
    return BlastRadius(
        default.max_nodes_moved_per_hour if nodes is None else nodes,
        float(share),
        default.max_weight_change_per_step if weight is None else weight,
    )


class _Reader:
    """Typed reads of decoded YAML that record problems as `source: key: message`."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems

    def bad(self, key: str, message: str) -> None:
        where = f"{self.source}: {key}" if key else self.source
        self.problems.append(f"{where}: {message}")

    def mapping(
        self, key: str, raw: object, keys: tuple[str, ...], required: bool | tuple[str, ...] = False
    ) -> dict[str, Any] | None:
        """The mapping at `key` (unknown and, with `required`, missing keys recorded: all of `keys` when
        True, else those named); its known keys are still read, so that one run reports every problem."""
        if raw is None and not required:
            return {}
        if not isinstance(raw, dict):
            self.bad(key, f"must be a mapping with keys {', '.join(keys)}")
            return None
        prefix = f"{key}." if key else ""
        for unknown in sorted(set(map(str, raw)) - set(keys)):
            self.bad(prefix + unknown, "unknown key")
        needed: tuple[str, ...] = keys if required is True else required or ()
        for missing in needed:
            if missing not in raw:
                self.bad(prefix + missing, "missing")
        return {name: value for name, value in raw.items() if name in keys}

    def integer(self, key: str, section: dict[str, Any], low: int, high: int | None) -> int | None:
        leaf = key.rpartition(".")[2]
        if leaf not in section:
            return None
        value = section[leaf]
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            span = f"{low}-{high}" if high is not None else f">= {low}"
            self.bad(key, f"must be an integer {span}, got {value!r}")
            return None
        return value

    def boolean(self, key: str, section: dict[str, Any]) -> bool | None:
        """The flag at `key` (False when absent; None, recorded, when not true or false)."""
        value = section.get(key.rpartition(".")[2], False)
        if not isinstance(value, bool):
            self.bad(key, f"must be true or false, got {value!r}")
            return None
        return value

    def sl_list(self, key: str, raw: object) -> frozenset[int] | None:
        values = raw if isinstance(raw, list) else []
        good = [v for v in values if not isinstance(v, bool) and isinstance(v, int) and 0 <= v <= MAX_SL]
        if not values or len(good) != len(values):
            self.bad(key, f"must be a non-empty list of service levels 0-{MAX_SL}, got {raw!r}")
            return None
        return frozenset(good)
