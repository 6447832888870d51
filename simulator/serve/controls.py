"""Control and fault requests, taken in the forms the real systems take them, applied to the model.

VL arbitration as opensm.conf lines (`qos_vlarb_high 0:4,1:0`; a table not given keeps its value), Slurm as
`scontrol update` words (`PartitionName=P Nodes=node[0001-0016]`, the full new list; `NodeName=...` for
drain and resume), faults as `kind` and its target (`FAULT_KINDS`); query parameters work too (every form:
docs/simulator.md). Every function checks its input first and raises RequestError (or the model's
ControlError/FaultError) without changing anything when the request is wrong.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping

from simulator.cluster.hostlist import expand_hostlist
from simulator.cluster.model import ClusterModel
from simulator.serve.errors import RequestError

Params = Mapping[str, str]
ModelAction = Callable[[ClusterModel, Params], str]
VLARB_KEYS = ("qos_vlarb_high", "qos_vlarb_low", "qos_sl2vl")
FAULT_KINDS = {
    "xid": "node, gpu (0), xid (79): an XID event on a GPU",
    "lose_gpu": "node, gpu: the GPU falls off the bus, its job fails, the node drains",
    "restore_gpu": "node, gpu: the GPU answers again (the node stays drained until resumed)",
    "link_down": "node and rail (0), or port=DESC/N: the cable goes down",
    "link_up": "node and rail (0), or port=DESC/N: the cable comes back",
    "flap": "node and rail (0), or port=DESC/N: down and straight back up (link_downed + 1)",
    "symbol_errors": "node and rail (0), or port=DESC/N; count (1)",
    "saturate": "node and rail (0), or port=DESC/N; counter (port_xmit_wait)",
    "switch_down": "switch=DESC or GUID: its management agent stops answering counter reads",
    "switch_up": "switch=DESC or GUID: it answers again",
    "scheduler_down": "the simulated slurmctld stops answering polls",
    "scheduler_up": "it answers again",
}


def request_params(query: Mapping[str, list[str]], body: bytes) -> dict[str, str]:
    """Query parameters, then `Key=Value` words of the body; keys lower-cased, the body wins."""
    params = {key.lower(): values[-1] for key, values in query.items() if values}
    try:
        words = shlex.split(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestError(f"cannot parse the request body: {exc}") from None
    for word in words:
        key, sep, value = word.partition("=")
        if sep:
            params[key.lower()] = value
    return params


def parse_opensm_qos(text: str) -> dict[str, str]:
    """The QoS keys of opensm.conf lines (`key value`, `#` comments); RequestError for any other key."""
    values: dict[str, str] = {}
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition(" ")
        if key not in VLARB_KEYS:
            problems.append(f"line {number}: {key!r} is not one of {', '.join(VLARB_KEYS)}")
        else:
            values[key] = value.strip()
    if problems:
        raise RequestError("; ".join(problems))
    return values


def set_vl_weights(model: ClusterModel, body: bytes, query: Mapping[str, list[str]]) -> str:
    """Apply new VL arbitration tables (and SL-to-VL map) from opensm.conf lines or query parameters."""
    try:
        given = parse_opensm_qos(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RequestError(f"the body is not text: {exc}") from None
    for short, key in (("high", "qos_vlarb_high"), ("low", "qos_vlarb_low"), ("sl2vl", "qos_sl2vl")):
        if query.get(short):
            given.setdefault(key, query[short][-1])
    if not given:
        raise RequestError(f"nothing to set: give {', '.join(VLARB_KEYS)} lines")
    qos = model.qos()
    sl2vl = given.get("qos_sl2vl")
    if sl2vl is not None:
        model.set_sl2vl(sl2vl)
    high, low = given.get("qos_vlarb_high"), given.get("qos_vlarb_low")
    if high is not None or low is not None:
        model.set_vl_weights(
            high if high is not None else qos.vlarb_high, low if low is not None else qos.vlarb_low
        )
    weights = ",".join(f"{vl}:{w}" for vl, w in enumerate(model.vl_weights()))
    return f"effective VL weights {weights}"


def _only(params: Params, allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise RequestError(f"unknown keys: {', '.join(unknown)} (expected {', '.join(sorted(allowed))})")


def set_partition(model: ClusterModel, params: Params) -> str:
    """`scontrol update PartitionName=P Nodes=...`: the partition's full new node list."""
    _only(params, {"partitionname", "pool", "nodes"})
    pool = params.get("partitionname") or params.get("pool")
    if not pool or "nodes" not in params:
        raise RequestError("give PartitionName=P and Nodes=LIST (the full new list)")
    model.set_partition_nodes(pool, params["nodes"])
    return f"partition {pool}: {len(model.partition_nodes(pool))} nodes"


def _nodes(model: ClusterModel, params: Params, state: str) -> list[str]:
    _only(params, {"nodename", "node", "reason", "state"})
    if params.get("state", state).upper() != state:
        raise RequestError(f"State={params['state']} does not belong on this endpoint (State={state})")
    text = params.get("nodename") or params.get("node")
    if not text:
        raise RequestError("give NodeName=LIST")
    names = expand_hostlist(text)
    unknown = [n for n in names if n not in model.topology.node_index]
    if unknown:
        raise RequestError(f"unknown nodes: {', '.join(unknown)}")
    return names


def drain(model: ClusterModel, params: Params) -> str:
    """`scontrol update NodeName=... State=DRAIN Reason=...`."""
    names = _nodes(model, params, "DRAIN")
    for name in names:
        model.drain(name, params.get("reason") or "drained by operator")
    return f"drained {len(names)} nodes"


def resume(model: ClusterModel, params: Params) -> str:
    """`scontrol update NodeName=... State=RESUME`."""
    names = _nodes(model, params, "RESUME")
    for name in names:
        model.resume(name)
    return f"resumed {len(names)} nodes"


def integer(params: Params, key: str, default: int | None = None) -> int:
    """An integer parameter (decimal or 0x hex), or `default`; RequestError when missing or malformed."""
    text = params.get(key)
    if text is None:
        if default is None:
            raise RequestError(f"{key} is required")
        return default
    try:
        return int(text, 0)
    except ValueError:
        raise RequestError(f"{key}={text!r} is not an integer") from None


def port_index(model: ClusterModel, params: Params) -> int:
    """A port: `port=DESC/N` (as `ibpool_fabric_link_info` names it), or a node's HCA port `rail`."""
    if "port" in params:
        names = {model.port_name(i): i for i in range(len(model.topology.ports))}
        index = names.get(params["port"])
        if index is None:
            raise RequestError(f"unknown port {params['port']!r} (expected DESC/N, e.g. leaf001/1)")
        return index
    if "node" not in params:
        raise RequestError("give node (and rail) or port=DESC/N")
    return model.hca_port(params["node"], integer(params, "rail", 0))


def link_index(model: ClusterModel, params: Params) -> int:
    """The link of the port `port_index` names."""
    if "port" not in params and "node" in params:
        return model.host_link(params["node"], integer(params, "rail", 0))
    link = model.topology.link_of_port[port_index(model, params)]
    if link < 0:
        raise RequestError(f"port {params.get('port')} has no cable")
    return link


def model_fault(model: ClusterModel, kind: str, params: Params) -> str:
    """Apply a fault kind that the model itself carries; returns what was done."""
    node = params.get("node", "")
    if kind == "xid":
        gpu, xid = integer(params, "gpu", 0), integer(params, "xid", 79)
        model.inject_xid(node, gpu, xid)
        return f"xid {xid} on {node}/gpu{gpu}"
    if kind in ("lose_gpu", "restore_gpu"):
        gpu = integer(params, "gpu")
        (model.lose_gpu if kind == "lose_gpu" else model.restore_gpu)(node, gpu)
        return f"{kind} {node}/gpu{gpu}"
    if kind in ("link_down", "link_up", "flap"):
        link = link_index(model, params)
        if kind == "flap":
            model.flap_link(link)
        else:
            model.set_link(link, kind == "link_up")
        return f"{kind} {model.link_name(link)}"
    if kind in ("symbol_errors", "saturate"):
        port = port_index(model, params)
        if kind == "saturate":
            model.saturate(port, params.get("counter", "port_xmit_wait"))
        else:
            model.add_symbol_errors(port, integer(params, "count", 1))
        return f"{kind} {model.port_name(port)}"
    raise RequestError(f"unknown fault kind {kind!r} (one of {', '.join(FAULT_KINDS)})")
