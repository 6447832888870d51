"""Prometheus service discovery groups for the node exporters, from what Slurm says about its nodes.

One group per node, in node order: `{"targets": ["ADDRESS:PORT"], "labels": {"node": N, "instance": N,
"pool": P, "cluster": C}}`, the file_sd (and http_sd) format. `node` is Slurm's node name (what the
scheduler exporter's `ibpool_pool_node_info{node}` names, so the per-pool rules join on it), and the
`instance` too, so that the lists for ibpool's exporter and for node_exporter (another `--targets.port`)
give one node's series the same `instance` (the rules match a port's series from both on it); `pool` the
node's partitions among the pools (several joined with `,`, sorted; empty when in none), `cluster`
Slurm's ClusterName unless given. ADDRESS is the node name, its NodeAddr or its NodeHostName. Nodes
without GPU GRES are left out unless asked for: they run no node exporter.

Rules: read-only (`sinfo --json`, `scontrol show config`); a file is replaced atomically (written next to
it, then renamed), so Prometheus never reads half of one, and it is not touched when Slurm cannot be read.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from exporter.scheduler.errors import ParseError
from exporter.scheduler.parse import parse_sinfo_nodes

AddressKind = Literal["name", "addr", "hostname"]
ADDRESS_KINDS: tuple[AddressKind, ...] = ("name", "addr", "hostname")
Group = dict[str, object]


@dataclass(frozen=True)
class NodeTarget:
    """One node as the target list needs it."""

    name: str
    address: str
    hostname: str
    partitions: tuple[str, ...]
    gpus: int


def parse_nodes(sinfo_json: str, gres_name: str = "gpu") -> list[NodeTarget]:
    """The nodes of `sinfo --json` with their address, host name, partitions and GPU count."""
    nodes = parse_sinfo_nodes(sinfo_json, gres_name)
    records = json.loads(sinfo_json)["nodes"]
    out: list[NodeTarget] = []
    for node, record in zip(nodes, records, strict=True):
        address = record.get("address") or node.name
        hostname = record.get("hostname") or node.name
        if not isinstance(address, str) or not isinstance(hostname, str):
            raise ParseError(f"sinfo: node {node.name}: `address` or `hostname` is not a string")
        out.append(NodeTarget(node.name, address, hostname, node.partitions, node.gres_gpus))
    return out


def parse_cluster_name(scontrol_config: str) -> str:
    """ClusterName from `scontrol show config` (`ClusterName             = gpu-a`)."""
    for line in scontrol_config.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "ClusterName" and value.strip():
            return value.strip()
    raise ParseError("scontrol show config: no ClusterName")


def sd_groups(
    nodes: Sequence[NodeTarget],
    cluster: str,
    port: int,
    *,
    address: AddressKind = "name",
    pools: Collection[str] = (),
    all_nodes: bool = False,
) -> list[Group]:
    """One file_sd group per node (with GPUs unless `all_nodes`); `pools` limits which partitions count."""
    groups: list[Group] = []
    for node in sorted(nodes, key=lambda n: n.name):
        if not all_nodes and node.gpus == 0:
            continue
        host = {"name": node.name, "addr": node.address, "hostname": node.hostname}[address]
        in_pools = sorted(p for p in set(node.partitions) if not pools or p in pools)
        labels = {"node": node.name, "instance": node.name, "pool": ",".join(in_pools), "cluster": cluster}
        groups.append({"targets": [f"{_host(host)}:{port}"], "labels": labels})
    return groups


def _host(host: str) -> str:
    """An IPv6 address in brackets, as a Prometheus target needs it."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def render(groups: Sequence[Mapping[str, object]]) -> str:
    """The JSON text Prometheus reads (sorted keys, one trailing newline)."""
    return json.dumps(list(groups), indent=2, sort_keys=True) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text`: a temporary file in the same directory, fsynced, then renamed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
