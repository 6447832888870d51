"""Parsers for `sinfo --json`, `squeue --json` (Slurm 22.05, OpenAPI v0.0.38), `scontrol -o show partitions`.

Anything unexpected raises ParseError; an `errors` list in the JSON (what the clients print, exit status
0, when the controller cannot be reached) raises SlurmReportedError. Later Slurm versions' shapes are
accepted where they are cheap to accept: a state given as a list (`["IDLE", "DRAIN"]`) and numbers
wrapped as `{"set": true, "infinite": false, "number": 2}`.
"""

from __future__ import annotations

import json
from typing import Any

from exporter.scheduler.errors import ParseError, SlurmReportedError
from exporter.scheduler.gres import gres_count, tres_count
from exporter.scheduler.model import Job, Node
from exporter.scheduler.states import BASE_STATES, normalise_node_state
from foundation.hostlist import count_array_tasks, expand_hostlist

Record = dict[str, Any]


def _load(text: str, key: str, command: str) -> list[Record]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"{command}: output is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ParseError(f"{command}: expected a JSON object at the top level")
    errors = document.get("errors") or []
    if not isinstance(errors, list):
        raise ParseError(f"{command}: `errors` is not a list")
    if errors:
        raise SlurmReportedError(f"{command} reported: {'; '.join(_error_text(e) for e in errors)}")
    records = document.get(key)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ParseError(f"{command}: `{key}` is missing or not a list of objects")
    return records


def _error_text(error: object) -> str:
    if not isinstance(error, dict):
        return str(error)
    parts = [str(error[k]) for k in ("source", "description", "error") if error.get(k)]
    return ": ".join(parts) or json.dumps(error, sort_keys=True)


def _str(record: Record, key: str, where: str, default: str | None = None) -> str:
    value = record.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, str):
        raise ParseError(f"{where}: `{key}` is not a string: {value!r}")
    return value


def _number(record: Record, key: str, where: str) -> int | None:
    """An integer field, unwrapping `{"set", "infinite", "number"}`; None when unset or absent."""
    value = record.get(key)
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(f"{where}: `{key}` is not an integer: {value!r}")
    return value


def _str_list(record: Record, key: str, where: str) -> list[str]:
    value = record.get(key) or []
    if isinstance(value, str):
        value = [v for v in value.split(",") if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(f"{where}: `{key}` is not a list of strings: {value!r}")
    return value


def _node_state(record: Record, where: str) -> tuple[str, list[str]]:
    raw = record.get("state")
    flags = _str_list(record, "state_flags", where)
    if isinstance(raw, list):
        words = [w for w in raw if isinstance(w, str)]
        if len(words) != len(raw) or not words:
            raise ParseError(f"{where}: `state` is not a list of strings: {raw!r}")
        base = next((w for w in words if w.upper() in BASE_STATES), "UNKNOWN")
        return base, [w for w in words if w != base] + flags
    if not isinstance(raw, str):
        raise ParseError(f"{where}: `state` is missing or not a string: {raw!r}")
    return raw, flags


def parse_sinfo_nodes(text: str, gres_name: str = "gpu") -> list[Node]:
    """Nodes from `sinfo --json`: name, normalised state, partitions, GPUs in the node's GRES."""
    nodes: list[Node] = []
    for index, record in enumerate(_load(text, "nodes", "sinfo")):
        where = f"sinfo: nodes[{index}]"
        name = _str(record, "name", where)
        if not name:
            raise ParseError(f"{where}: empty node name")
        base, flags = _node_state(record, f"sinfo: node {name}")
        try:
            gpus = gres_count(_str(record, "gres", f"sinfo: node {name}", ""), gres_name)
        except ValueError as exc:
            raise ParseError(f"sinfo: node {name}: {exc}") from None
        partitions = tuple(_str_list(record, "partitions", f"sinfo: node {name}"))
        nodes.append(Node(name, normalise_node_state(base, flags), partitions, gpus))
    return nodes


def _requested_gpus(record: Record, node_count: int, where: str, gres_name: str) -> int:
    """GPUs a job asks for: per job, else per node x nodes, per task x tasks, per socket, else TRES."""
    per_job = gres_count(_str(record, "tres_per_job", where, ""), gres_name)
    if per_job:
        return per_job
    per_node = gres_count(_str(record, "tres_per_node", where, ""), gres_name)
    if per_node:
        return per_node * max(node_count, 1)
    per_task = gres_count(_str(record, "tres_per_task", where, ""), gres_name)
    if per_task:
        return per_task * max(_number(record, "tasks", where) or 1, 1)
    per_socket = gres_count(_str(record, "tres_per_socket", where, ""), gres_name)
    if per_socket:
        sockets = _number(record, "sockets_per_node", where) or 1
        return per_socket * sockets * max(node_count, 1)
    return tres_count(_str(record, "tres_req_str", where, ""), gres_name) or 0


def _allocated_gpus(record: Record, node_count: int, where: str, gres_name: str) -> int:
    """GPUs a job holds: its per-node GRES detail, else its allocated TRES, else its request."""
    detail = record.get("gres_detail") or []
    if not isinstance(detail, list) or not all(isinstance(d, str) for d in detail):
        raise ParseError(f"{where}: `gres_detail` is not a list of strings: {detail!r}")
    from_detail = sum(gres_count(d, gres_name) for d in detail)
    if from_detail:
        return from_detail
    from_tres = tres_count(_str(record, "tres_alloc_str", where, ""), gres_name)
    if from_tres is not None:
        return from_tres
    return _requested_gpus(record, node_count, where, gres_name)


def _job_state(record: Record, where: str) -> str:
    raw = record.get("job_state")
    if isinstance(raw, list) and raw and all(isinstance(s, str) for s in raw):
        raw = raw[0]
    if not isinstance(raw, str) or not raw:
        raise ParseError(f"{where}: `job_state` is missing or not a string: {raw!r}")
    return raw.upper()


def _parse_job(record: Record, index: int, gres_name: str) -> Job:
    job_id = _number(record, "job_id", f"squeue: jobs[{index}]")
    if job_id is None:
        raise ParseError(f"squeue: jobs[{index}]: `job_id` is missing")
    where = f"squeue: job {job_id}"
    state = _job_state(record, where)
    partitions = tuple(p for p in _str(record, "partition", where, "").split(",") if p)
    node_count = _number(record, "node_count", where) or 0
    try:
        nodes = tuple(expand_hostlist(_str(record, "nodes", where, "")))
        job = Job(job_id, partitions, state, node_count, nodes, 0)
        if job.active:
            gpus = _allocated_gpus(record, node_count, where, gres_name)
        else:
            gpus = _requested_gpus(record, node_count, where, gres_name)
        tasks = _str(record, "array_task_string", where, "")
        count = count_array_tasks(tasks) if tasks and state == "PENDING" else 1
    except ValueError as exc:
        raise ParseError(f"{where}: {exc}") from None
    return Job(job_id, partitions, state, node_count, nodes, gpus, count)


def parse_squeue_jobs(text: str, gres_name: str = "gpu") -> list[Job]:
    """Job records from `squeue --json` (every state squeue returns; the caller picks)."""
    return [
        _parse_job(record, index, gres_name) for index, record in enumerate(_load(text, "jobs", "squeue"))
    ]


def parse_partition_names(text: str) -> list[str]:
    """Partition names from `scontrol --oneliner show partitions` (one `PartitionName=...` line each)."""
    names: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("No partitions"):
            continue
        first = line.split(None, 1)[0]
        key, sep, name = first.partition("=")
        if key != "PartitionName" or not sep or not name:
            raise ParseError(f"scontrol show partitions: line {number} does not start with PartitionName=")
        names.append(name)
    return names
