"""Proposals as frozen data: validation, canonical JSON and the content id.

Input limits (a proposal is small; anything bigger is a mistake or an attack, refused with a clear error
before it is parsed): at most `MAX_DOCUMENT_BYTES` of JSON nested at most `MAX_DEPTH` deep, texts
(`expected_effect`, evidence queries) of at most `MAX_TEXT_CHARS`, at most `MAX_ITEMS` changes and as many
evidence items.

A `move_nodes` proposal may name the nodes it takes back by **reclaim** (`reclaim`: a canonical node list,
each node one that leaves a Slurm partition in its changes): the hooks requeue the jobs running on them at
once instead of waiting for them to end, when the operator allows it. Absent (or empty) means every node
drains, as before the field existed; it is left out of the canonical JSON then, so older proposals keep
their ids.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast, get_args

from proposals import targets
from proposals.errors import ProposalFormatError
from proposals.timestamps import format_rfc3339, parse_rfc3339

Kind = Literal["move_nodes", "set_vl_weights", "set_port_group"]
KINDS: tuple[str, ...] = get_args(Kind)

KIND_FAMILIES: Mapping[str, frozenset[str]] = {
    "move_nodes": frozenset({targets.SLURM_NODES, targets.PARTITION_MEMBERS}),
    "set_vl_weights": frozenset({targets.VLARB_HIGH, targets.VLARB_LOW, targets.SL2VL}),
    "set_port_group": frozenset({targets.PORT_GROUP_SL, targets.SL2VL}),
}

_WINDOW = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_POLICY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FIELDS = ("kind", "changes", "evidence", "expected_effect", "created_at", "expires_at", "policy")
_OPTIONAL = ("reclaim",)

MAX_DOCUMENT_BYTES = 1 << 20
"""A proposal file or request body: 1 MiB (a move of thousands of nodes takes well under 100 KiB)."""
MAX_DEPTH = 8
"""Nesting of JSON arrays and objects (a proposal needs 3)."""
MAX_TEXT_CHARS = 8192
MAX_ITEMS = 1024
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(rb"[][{}]")


@dataclass(frozen=True)
class Change:
    """One target's value before (as read from the live system) and after the change."""

    target: str
    before: str
    after: str


@dataclass(frozen=True)
class Evidence:
    """Why: the query, its window (a Prometheus duration), the value seen and the threshold crossed."""

    query: str
    window: str
    value: float
    threshold: float

    def __post_init__(self) -> None:
        # 3 and 3.0 must serialise alike, or the same evidence would give two ids.
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "threshold", float(self.threshold))


@dataclass(frozen=True)
class Proposal:
    """A proposed change with its evidence; any instance is valid (checked on construction)."""

    kind: Kind
    changes: tuple[Change, ...]
    evidence: tuple[Evidence, ...]
    expected_effect: str
    created_at: datetime
    expires_at: datetime
    policy: str
    reclaim: str = ""
    """Nodes taken back by reclaim (their jobs requeued at once), a canonical node list; empty: none."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", tuple(self.changes))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        problems: list[str] = []
        _check_kind(self.kind, problems)
        _check_changes(self.kind, [vars(change) for change in self.changes], problems)
        _check_reclaim(self.kind, self.reclaim, [vars(change) for change in self.changes], problems)
        for index, item in enumerate(self.evidence):
            _check_evidence(f"evidence[{index}]", vars(item), problems)
        _check_text("expected_effect", self.expected_effect, problems)
        _check_policy(self.policy, problems)
        _check_times(self.created_at, self.expires_at, problems)
        if problems:
            raise ProposalFormatError([_cut(problem) for problem in problems])

    @property
    def reclaim_nodes(self) -> tuple[str, ...]:
        """The nodes of `reclaim`, in natural order (empty: every node drains)."""
        return targets.parse_node_list(self.reclaim) if self.reclaim else ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (timestamps as RFC 3339 UTC text); `reclaim` only when it names nodes."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "changes": [{"target": c.target, "before": c.before, "after": c.after} for c in self.changes],
            "evidence": [
                {"query": e.query, "window": e.window, "value": e.value, "threshold": e.threshold}
                for e in self.evidence
            ],
            "expected_effect": self.expected_effect,
            "created_at": format_rfc3339(self.created_at),
            "expires_at": format_rfc3339(self.expires_at),
            "policy": self.policy,
        }
        if self.reclaim:
            data["reclaim"] = self.reclaim
        return data

    def canonical_json(self) -> bytes:
        """Sorted keys, no spaces, UTF-8: the bytes the id is computed from and the store keeps."""
        return canonical_bytes(self.to_dict())

    @property
    def id(self) -> str:
        """sha256 hex of the canonical JSON."""
        return hashlib.sha256(self.canonical_json()).hexdigest()


def canonical_bytes(data: Any) -> bytes:
    """Canonical JSON of plain data."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def from_json(text: str | bytes, source: str = "") -> Proposal:
    """A proposal from JSON text; ProposalFormatError lists every problem, prefixed with `source:`."""
    problems: list[str] = []

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        for key in sorted({key for key in keys if keys.count(key) > 1}):
            problems.append(f"{key}: given more than once")
        return dict(pairs)

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    size_problem = document_size_problem(len(data)) or _depth_problem(data)
    if size_problem:
        raise ProposalFormatError([_where(source, size_problem)])
    try:
        raw = json.loads(text, object_pairs_hook=no_duplicates)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProposalFormatError([_where(source, f"not valid JSON: {exc}")]) from None
    except RecursionError:  # the depth check should have caught it; never a traceback
        raise ProposalFormatError([_where(source, f"nested deeper than {MAX_DEPTH} levels")]) from None
    proposal = _build(raw, problems)
    if problems or proposal is None:
        raise ProposalFormatError([_where(source, problem) for problem in problems])
    return proposal


def document_size_problem(size: int) -> str | None:
    """Why a document of `size` bytes is refused (None when it is within MAX_DOCUMENT_BYTES)."""
    if size > MAX_DOCUMENT_BYTES:
        return f"larger than {MAX_DOCUMENT_BYTES} bytes; a proposal is never that big"
    return None


def _depth_problem(data: bytes) -> str | None:
    """Why the nesting of JSON `data` is refused, found without parsing (None when within MAX_DEPTH)."""
    depth = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub(b'""', data)):
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels of arrays and objects; a proposal needs 3"
    return None


def from_dict(raw: object, source: str = "") -> Proposal:
    """A proposal from decoded JSON; ProposalFormatError lists every problem with its key."""
    problems: list[str] = []
    proposal = _build(raw, problems)
    if problems or proposal is None:
        raise ProposalFormatError([_where(source, problem) for problem in problems])
    return proposal


def _where(source: str, problem: str) -> str:
    problem = _cut(problem)
    return f"{source}: {problem}" if source else problem


def _cut(problem: str) -> str:
    """A problem message of a sensible length (the values it quotes may be huge)."""
    return problem if len(problem) <= 300 else f"{problem[:280]}... ({len(problem)} characters)"


def _build(raw: object, problems: list[str]) -> Proposal | None:
    """Check every field of decoded JSON, recording each problem; the proposal when there are none."""
    if not isinstance(raw, dict):
        problems.append("a proposal must be a JSON object")
        return None
    for key in sorted(set(raw) - set(_FIELDS) - set(_OPTIONAL) - {"id"}):
        problems.append(f"{key}: unknown key")
    for key in _FIELDS:
        if key not in raw:
            problems.append(f"{key}: missing")
    kind = raw.get("kind")
    if "kind" in raw:
        _check_kind(kind, problems)
    changes = evidence = None
    if "changes" in raw:
        changes = _items("changes", raw["changes"], ("target", "before", "after"), problems, required=True)
    if changes is not None:
        _check_changes(kind if kind in KINDS else None, changes, problems)
    if "evidence" in raw:
        evidence = _items("evidence", raw["evidence"], ("query", "window", "value", "threshold"), problems)
    for index, item in enumerate(evidence or []):
        _check_evidence(f"evidence[{index}]", item, problems)
    if "expected_effect" in raw:
        _check_text("expected_effect", raw["expected_effect"], problems)
    if "policy" in raw:
        _check_policy(raw["policy"], problems)
    reclaim = raw.get("reclaim", "")
    if changes is not None:
        _check_reclaim(kind, reclaim, changes, problems)
    created = _time("created_at", raw["created_at"], problems) if "created_at" in raw else None
    expires = _time("expires_at", raw["expires_at"], problems) if "expires_at" in raw else None
    if created is not None and expires is not None:
        _check_times(created, expires, problems)
    if problems or changes is None or evidence is None or created is None or expires is None:
        return None
    proposal = Proposal(
        kind=cast(Kind, kind),
        changes=tuple(Change(**item) for item in changes),
        evidence=tuple(Evidence(**item) for item in evidence),
        expected_effect=cast(str, raw["expected_effect"]),
        created_at=created,
        expires_at=expires,
        policy=cast(str, raw["policy"]),
        reclaim=cast(str, reclaim),
    )
    if "id" in raw and raw["id"] != proposal.id:
        problems.append(f"id: does not match the content (content id is {proposal.id})")
        return None
    return proposal


def _items(
    key: str, raw: object, keys: tuple[str, ...], problems: list[str], required: bool = False
) -> list[dict[str, Any]] | None:
    """The objects of a list field, each with its known keys (missing and unknown keys recorded)."""
    if not isinstance(raw, list) or (required and not raw):
        problems.append(f"{key}: must be a {'non-empty ' if required else ''}list of objects")
        return None
    if len(raw) > MAX_ITEMS:
        problems.append(f"{key}: {len(raw)} items; at most {MAX_ITEMS}")
        return None
    items: list[dict[str, Any]] = []
    for index, item in enumerate(raw):
        where = f"{key}[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: must be an object with keys {', '.join(keys)}")
            continue
        for name in sorted(set(item) - set(keys)):
            problems.append(f"{where}.{name}: unknown key")
        for name in keys:
            if name not in item:
                problems.append(f"{where}.{name}: missing")
        items.append({name: item[name] for name in keys if name in item})
    return items


def _time(key: str, value: object, problems: list[str]) -> datetime | None:
    if not isinstance(value, str):
        problems.append(f"{key}: must be an RFC 3339 string, got {_shown(value)}")
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        problems.append(f"{key}: {exc}")
        return None


def _check_kind(kind: object, problems: list[str]) -> None:
    if kind not in KINDS:
        problems.append(f"kind: must be one of {', '.join(KINDS)}, got {_shown(kind)}")


def _check_changes(kind: object, changes: list[dict[str, Any]], problems: list[str]) -> None:
    """Check changes given as field mappings (fields may be missing: they were reported already)."""
    if not changes:
        problems.append("changes: must list at least one change")
    seen: set[str] = set()
    for index, change in enumerate(changes):
        where = f"changes[{index}]"
        values = {key: change[key] for key in ("target", "before", "after") if key in change}
        for key, value in values.items():
            if not isinstance(value, str):
                problems.append(f"{where}.{key}: must be a string, got {_shown(value)}")
        name = values.get("target")
        if not isinstance(name, str):
            continue
        try:
            target = targets.parse_target(name)
        except ValueError as exc:
            problems.append(f"{where}.target: {exc}")
            continue
        if name in seen:
            problems.append(f"{where}.target: {name} is changed more than once")
        seen.add(name)
        if kind in KIND_FAMILIES and target.family not in KIND_FAMILIES[str(kind)]:
            problems.append(f"{where}.target: a {kind} proposal cannot change {name}")
        for key in ("before", "after"):
            value = values.get(key)
            if isinstance(value, str):
                try:
                    targets.check_value(target, value)
                except ValueError as exc:
                    problems.append(f"{where}.{key}: {exc}")
        if "before" in values and values.get("before") == values.get("after"):
            problems.append(f"{where}.after: equals before (nothing would change)")


def _check_reclaim(kind: object, reclaim: object, changes: list[dict[str, Any]], problems: list[str]) -> None:
    """`reclaim`: a canonical node list of nodes that leave a Slurm partition, on a move_nodes proposal."""
    if reclaim == "":
        return
    if not isinstance(reclaim, str):
        problems.append(f"reclaim: must be a node list string (empty: none), got {_shown(reclaim)}")
        return
    if kind != "move_nodes":
        problems.append(f"reclaim: only a move_nodes proposal takes nodes back, not {_shown(kind)}")
        return
    try:
        nodes = targets.parse_node_list(reclaim)
    except ValueError as exc:
        problems.append(f"reclaim: {exc}")
        return
    leaving: set[str] = set()
    for change in changes:
        name, before, after = (change.get(key) for key in ("target", "before", "after"))
        if not (isinstance(name, str) and isinstance(before, str) and isinstance(after, str)):
            continue
        try:
            if targets.parse_target(name).family != targets.SLURM_NODES:
                continue
            leaving |= set(targets.parse_node_list(before)) - set(targets.parse_node_list(after))
        except ValueError:
            continue  # reported with the change
    if len(nodes) > MAX_ITEMS:
        problems.append(f"reclaim: {len(nodes)} nodes; at most {MAX_ITEMS}")
    elif stray := [node for node in nodes if node not in leaving]:
        problems.append(
            f"reclaim: {','.join(stray)} leave(s) no Slurm partition in the changes; only a node that "
            "leaves one can be taken back"
        )


def _check_evidence(where: str, item: dict[str, Any], problems: list[str]) -> None:
    """Check one evidence item given as a field mapping (missing fields were reported already)."""
    _check_text(f"{where}.query", item.get("query", "?"), problems)
    window = item.get("window", "5m")
    if not isinstance(window, str) or not _WINDOW.fullmatch(window):
        problems.append(f"{where}.window: must be a duration like 5m or 1h30m, got {_shown(window)}")
    for key in ("value", "threshold"):
        number = item.get(key, 0.0)
        if not _finite(number):
            problems.append(f"{where}.{key}: must be a finite number, got {_shown(number)}")


def _finite(number: object) -> bool:
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return False
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def _shown(value: object) -> str:
    """`repr(value)`, cut short: a message never quotes a whole oversized input."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _check_text(key: str, value: object, problems: list[str]) -> None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{key}: must be a non-empty string, got {_shown(value)}")
        return
    if len(value) > MAX_TEXT_CHARS:
        problems.append(f"{key}: {len(value)} characters; at most {MAX_TEXT_CHARS}")
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        problems.append(f"{key}: must be valid Unicode text (no lone surrogates)")


def _check_policy(value: object, problems: list[str]) -> None:
    if not isinstance(value, str) or not _POLICY.fullmatch(value):
        problems.append(
            "policy: must be a rule name of letters, digits, '.', '_' or '-' (at most 64), "
            f"got {_shown(value)}"
        )


def _check_times(created: datetime, expires: datetime, problems: list[str]) -> None:
    for key, moment in (("created_at", created), ("expires_at", expires)):
        if moment.tzinfo is None:
            problems.append(f"{key}: must be timezone-aware")
    if created.tzinfo is not None and expires.tzinfo is not None and expires <= created:
        problems.append("expires_at: must be after created_at")
