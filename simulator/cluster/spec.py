"""The cluster spec: frozen dataclasses, loadable from a small dict or YAML file (`ibpool simulate --spec`).

```yaml
nodes: 64                 # node0001 .. node0064
pools:
  - {name: recsys, nodes: 32, priority_class: high}   # a count (consecutive nodes) or a list of names
  - {name: llm, nodes: 32}
```

Every key, in a full example: docs/simulator.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simulator.cluster.errors import SpecError

NDR_BYTES_PER_SECOND = 400e9 / 8
VL_COUNT = 8  # data VLs the model arbitrates (VL0..VL7)
SL_COUNT = 16


@dataclass(frozen=True)
class FabricSpec:
    """A 2-level fat tree: leaves with `hosts_per_leaf` host ports, uplinks set by the oversubscription."""

    hosts_per_leaf: int = 8
    oversubscription: float = 1.0  # host ports : uplinks per leaf
    spines: int | None = None  # default: one spine per uplink of a leaf
    link_bytes_per_second: float = NDR_BYTES_PER_SECOND
    wait_tick_bytes: int = 256  # bytes a port could send during one PortXmitWait tick
    mtu_bytes: int = 4096
    # What weighted max-min leaves out (simulator.cluster.effects); off unless a scenario turns it on.
    arbitration_packets: bool = False
    credit_stall: float = 0.0
    hol_blocking: float = 0.0

    @property
    def uplinks_per_leaf(self) -> int:
        """Uplinks of every leaf: hosts / oversubscription, at least one."""
        return max(1, math.ceil(self.hosts_per_leaf / self.oversubscription - 1e-9))

    @property
    def spine_count(self) -> int:
        """Number of spine switches."""
        return self.spines if self.spines is not None else self.uplinks_per_leaf


@dataclass(frozen=True)
class QosSpec:
    """OpenSM-style QoS: `qos_vlarb_high`/`qos_vlarb_low` as (VL, weight 0-255) pairs and `qos_sl2vl`."""

    vlarb_high: tuple[tuple[int, int], ...] = ()
    vlarb_low: tuple[tuple[int, int], ...] = tuple((vl, 64) for vl in range(VL_COUNT))
    sl2vl: tuple[int, ...] = tuple(sl % VL_COUNT for sl in range(SL_COUNT))

    def vl_weights(self) -> tuple[int, ...]:
        """Effective weight per VL: the sum of its entries in both tables (see the package docstring)."""
        weights = [0] * VL_COUNT
        for vl, weight in (*self.vlarb_high, *self.vlarb_low):
            weights[vl] += weight
        return tuple(weights)


@dataclass(frozen=True)
class PoolSpec:
    """A pool (Slurm partition): its initial member nodes and its priority class."""

    name: str
    nodes: tuple[str, ...]
    priority_class: str = "normal"


@dataclass(frozen=True)
class ClusterSpec:
    """Everything the model is built from."""

    nodes: tuple[str, ...]
    pools: tuple[PoolSpec, ...]
    fabric: FabricSpec = field(default_factory=FabricSpec)
    qos: QosSpec = field(default_factory=QosSpec)
    priority_classes: Mapping[str, int] = field(default_factory=lambda: {"normal": 0, "high": 1})
    gpus_per_node: int = 8
    ports_per_node: int = 1
    tick_seconds: float = 10.0
    seed: int = 1
    start_hour: float = 0.0  # local hour of day at t = 0 (for day/night workloads)

    def pool(self, name: str) -> PoolSpec:
        """The pool called `name`."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)


def node_names(count: int, prefix: str = "node") -> tuple[str, ...]:
    """`node0001`, `node0002`, ..."""
    return tuple(f"{prefix}{i + 1:04d}" for i in range(count))


def simple_spec(
    pools: Mapping[str, int],
    *,
    hosts_per_leaf: int = 8,
    oversubscription: float = 1.0,
    ports_per_node: int = 1,
    seed: int = 1,
    tick_seconds: float = 10.0,
    priority: Mapping[str, str] | None = None,
    qos: QosSpec | None = None,
) -> ClusterSpec:
    """A spec with consecutive nodes per pool (`{"a": 16, "b": 8}`: a gets node0001-0016)."""
    names = node_names(sum(pools.values()))
    specs, start = [], 0
    for name, count in pools.items():
        cls = (priority or {}).get(name, "normal")
        specs.append(PoolSpec(name, names[start : start + count], cls))
        start += count
    return validate(
        ClusterSpec(
            nodes=names,
            pools=tuple(specs),
            fabric=FabricSpec(hosts_per_leaf=hosts_per_leaf, oversubscription=oversubscription),
            qos=qos or QosSpec(),
            ports_per_node=ports_per_node,
            seed=seed,
            tick_seconds=tick_seconds,
        )
    )


def check_vlarb(entries: Sequence[tuple[int, int]], key: str) -> list[str]:
    """Problems with a VL arbitration table (VL 0-7, weight 0-255, each VL once)."""
    problems, seen = [], set()
    for vl, weight in entries:
        if not 0 <= vl < VL_COUNT:
            problems.append(f"{key}: VL {vl} is not 0..{VL_COUNT - 1}")
        if not 0 <= weight <= 255:
            problems.append(f"{key}: weight {weight} of VL {vl} is not 0..255")
        if vl in seen:
            problems.append(f"{key}: VL {vl} appears twice")
        seen.add(vl)
    return problems


def check_sl2vl(sl2vl: Sequence[int], key: str = "qos.sl2vl") -> list[str]:
    """Problems with an SL-to-VL map (up to 16 entries, each VL 0-7)."""
    problems = []
    if not 1 <= len(sl2vl) <= SL_COUNT:
        problems.append(f"{key}: needs 1..{SL_COUNT} entries, has {len(sl2vl)}")
    problems += [
        f"{key}[{sl}]: VL {vl} is not 0..{VL_COUNT - 1}"
        for sl, vl in enumerate(sl2vl)
        if not 0 <= vl < VL_COUNT
    ]
    return problems


def validate(spec: ClusterSpec) -> ClusterSpec:
    """Return `spec` if it is consistent; raise SpecError listing every problem otherwise."""
    problems: list[str] = []
    if not spec.nodes:
        problems.append("nodes: at least one node is needed")
    if len(set(spec.nodes)) != len(spec.nodes):
        problems.append("nodes: names repeat")
    if spec.gpus_per_node < 1:
        problems.append("gpus_per_node: must be >= 1")
    if spec.ports_per_node < 1:
        problems.append("ports_per_node: must be >= 1")
    if spec.tick_seconds <= 0:
        problems.append("tick_seconds: must be > 0")
    fab = spec.fabric
    if fab.hosts_per_leaf < 1:
        problems.append("fabric.hosts_per_leaf: must be >= 1")
    if fab.oversubscription <= 0:
        problems.append("fabric.oversubscription: must be > 0")
    if fab.spines is not None and fab.spines < 1:
        problems.append("fabric.spines: must be >= 1")
    if fab.link_bytes_per_second <= 0:
        problems.append("fabric.link_bytes_per_second: must be > 0")
    if not 0 <= fab.credit_stall < 1:
        problems.append("fabric.credit_stall: must be in [0, 1)")
    if not 0 <= fab.hol_blocking <= 1:
        problems.append("fabric.hol_blocking: must be in [0, 1]")
    problems += check_vlarb(spec.qos.vlarb_high, "qos.vlarb_high")
    problems += check_vlarb(spec.qos.vlarb_low, "qos.vlarb_low")
    problems += check_sl2vl(spec.qos.sl2vl)
    for cls, sl in spec.priority_classes.items():
        if not 0 <= sl < SL_COUNT:
            problems.append(f"priority_classes.{cls}: SL {sl} is not 0..{SL_COUNT - 1}")
    known = set(spec.nodes)
    names = [p.name for p in spec.pools]
    if len(set(names)) != len(names):
        problems.append("pools: names repeat")
    for i, pool in enumerate(spec.pools):
        unknown = [n for n in pool.nodes if n not in known]
        if unknown:
            problems.append(f"pools[{i}] ({pool.name}).nodes: unknown nodes {', '.join(unknown[:5])}")
        if pool.priority_class not in spec.priority_classes:
            problems.append(f"pools[{i}] ({pool.name}).priority_class: unknown class {pool.priority_class!r}")
    if problems:
        raise SpecError("cluster spec: " + "; ".join(problems))
    return spec


def _pairs(value: Any, key: str, problems: list[str]) -> tuple[tuple[int, int], ...]:
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = [tuple(v) if isinstance(v, list | tuple) else v for v in value]
    else:
        problems.append(f"{key}: expected VL:weight pairs")
        return ()
    out = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, int) for x in item)):
            problems.append(f"{key}: {item!r} is not a (VL, weight) pair of integers")
            continue
        out.append((int(item[0]), int(item[1])))
    return tuple(out)


def _typed(value: Any, default: Any, key: str, problems: list[str]) -> Any:
    """`value` as the type of `default` (YAML 1.1 reads `5.0e10` as a string: numbers are parsed here), else
    `default` with a problem recorded."""
    if default is None or isinstance(default, str):
        return value
    kind = type(default)
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise ValueError(value)
        number = float(value) if isinstance(value, str) else value
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ValueError(value)
        if kind is int and number != int(number):
            raise ValueError(value)
        return kind(number)
    except (TypeError, ValueError):
        problems.append(f"{key}: {value!r} is not a {kind.__name__}")
        return default


def spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> ClusterSpec:
    """Build and validate a spec from plain data (as loaded from YAML)."""
    problems: list[str] = []
    known = {
        "nodes", "pools", "fabric", "qos", "priority_classes", "gpus_per_node", "ports_per_node",
        "tick_seconds", "seed", "start_hour", "node_prefix",
    }  # fmt: skip
    problems += [f"{key}: unknown key" for key in data if key not in known]
    raw_nodes = data.get("nodes", 0)
    nodes = (
        node_names(raw_nodes, str(data.get("node_prefix", "node")))
        if isinstance(raw_nodes, int)
        else tuple(str(n) for n in raw_nodes)
    )
    pools, start = [], 0
    for i, raw in enumerate(data.get("pools", [])):
        if not isinstance(raw, Mapping) or "name" not in raw:
            problems.append(f"pools[{i}]: needs a name")
            continue
        members = raw.get("nodes", 0)
        if isinstance(members, int):
            chosen = nodes[start : start + members]
            if len(chosen) < members:
                problems.append(f"pools[{i}].nodes: {members} asked, only {len(chosen)} nodes left")
            start += members
        else:
            chosen = tuple(str(n) for n in members)
        pools.append(PoolSpec(str(raw["name"]), tuple(chosen), str(raw.get("priority_class", "normal"))))
    fab_raw = dict(data.get("fabric", {}))
    fab_known = {f for f in FabricSpec.__dataclass_fields__}
    problems += [f"fabric.{k}: unknown key" for k in fab_raw if k not in fab_known]
    fab_defaults = FabricSpec()
    fabric = FabricSpec(
        **{
            k: _typed(v, getattr(fab_defaults, k), f"fabric.{k}", problems)
            for k, v in fab_raw.items()
            if k in fab_known
        }
    )
    qos_raw = dict(data.get("qos", {}))
    qos = QosSpec(
        vlarb_high=_pairs(qos_raw.get("vlarb_high", QosSpec().vlarb_high), "qos.vlarb_high", problems),
        vlarb_low=_pairs(qos_raw.get("vlarb_low", QosSpec().vlarb_low), "qos.vlarb_low", problems),
        sl2vl=tuple(int(v) for v in qos_raw.get("sl2vl", QosSpec().sl2vl)),
    )
    spec = ClusterSpec(
        nodes=nodes,
        pools=tuple(pools),
        fabric=fabric,
        qos=qos,
        priority_classes=dict(data.get("priority_classes", {"normal": 0, "high": 1})),
        gpus_per_node=_typed(data.get("gpus_per_node", 8), 8, "gpus_per_node", problems),
        ports_per_node=_typed(data.get("ports_per_node", 1), 1, "ports_per_node", problems),
        tick_seconds=_typed(data.get("tick_seconds", 10.0), 10.0, "tick_seconds", problems),
        seed=_typed(data.get("seed", 1), 1, "seed", problems),
        start_hour=_typed(data.get("start_hour", 0.0), 0.0, "start_hour", problems),
    )
    try:
        validate(spec)
    except SpecError as exc:
        problems.append(str(exc).removeprefix("cluster spec: "))
    if problems:
        raise SpecError(f"{source}: " + "; ".join(problems))
    return spec


def load_spec(path: str | Path) -> ClusterSpec:
    """Load a spec from a YAML file."""
    text = Path(path).read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, Mapping):
        raise SpecError(f"{path}: the top level must be a mapping")
    return spec_from_dict(data, str(path))
