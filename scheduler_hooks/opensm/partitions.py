"""partitions.conf: find a partition's statement and rewrite its member list, keeping the rest as is.

A statement is `Name[=PKey][,flag[=value]...] : member[=full|limited|both], ... ;` (comments from `#`).
ibpool manages the statement named like the pool, whose member list must hold only port GUIDs (other
statements may use the keywords ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF; a list with anything else,
such as multicast groups, is left alone and refused as a target). A member with no membership is
limited, unless the statement has `defmember=full|both`; ibpool writes the membership on every GUID.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEYWORDS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")
_GUID = re.compile(r"0x[0-9a-fA-F]{1,16}")
_MEMBERSHIPS = ("full", "limited", "both")


class PartitionError(ValueError):
    """partitions.conf cannot be read or edited the way ibpool needs."""


@dataclass(frozen=True)
class Statement:
    """One partition statement and where it lies in the text."""

    name: str
    pkey: int | None
    flags: dict[str, str]
    members: tuple[tuple[str, str], ...] | None
    start: int
    colon: int
    end: int

    @property
    def default_membership(self) -> str:
        """What a member without `=...` gets."""
        value = self.flags.get("defmember", "limited")
        return value if value in _MEMBERSHIPS else "limited"


def _blank_comments(text: str) -> str:
    """The text with comments replaced by spaces (offsets unchanged)."""
    return re.sub(r"#[^\n]*", lambda m: " " * len(m.group(0)), text)


def parse_partitions(text: str) -> list[Statement]:
    """Every statement; `members` is None when the member list is not the simple form."""
    code = _blank_comments(text)
    statements: list[Statement] = []
    start = 0
    for match in re.finditer(";", code):
        chunk = code[start : match.start()]
        if chunk.strip():
            statements.append(_statement(chunk, start, match.end()))
        start = match.end()
    if code[start:].strip():
        raise PartitionError(f"text after the last ';': {code[start:].strip()[:60]!r}")
    return statements


def _statement(chunk: str, start: int, end: int) -> Statement:
    header, colon, body = chunk.partition(":")
    if not colon:
        raise PartitionError(f"statement without ':': {chunk.strip()[:60]!r}")
    parts = [p.strip() for p in header.split(",")]
    name, _, pkey_text = parts[0].partition("=")
    pkey: int | None = None
    if pkey_text.strip():
        try:
            pkey = int(pkey_text.strip(), 0) & 0x7FFF
        except ValueError as exc:
            raise PartitionError(f"partition {name.strip()!r}: bad pkey {pkey_text.strip()!r}") from exc
    flags: dict[str, str] = {}
    for flag in parts[1:]:
        key, _, value = flag.partition("=")
        flags[key.strip()] = value.strip()
    return Statement(name.strip(), pkey, flags, _members(body), start, start + len(header), end)


def _members(body: str) -> tuple[tuple[str, str], ...] | None:
    if ":" in body:
        return None
    members: list[tuple[str, str]] = []
    for part in body.split(","):
        token = part.strip()
        if not token:
            continue
        ident, _, membership = token.partition("=")
        ident, membership = ident.strip(), membership.strip()
        if membership and membership not in _MEMBERSHIPS:
            return None
        if _GUID.fullmatch(ident):
            ident = f"0x{int(ident, 16):016x}"
        elif ident not in KEYWORDS:
            return None
        members.append((ident, membership))
    return tuple(members)


def find(statements: list[Statement], name: str) -> Statement | None:
    """The statement called `name`."""
    return next((s for s in statements if s.name == name), None)


def port_memberships(statement: Statement) -> dict[str, str]:
    """Port GUID -> full|limited|both for the statement's GUID members (keywords left out)."""
    if statement.members is None:
        raise PartitionError(f"partition {statement.name!r}: member list is not GUIDs and keywords")
    return {
        ident: membership or statement.default_membership
        for ident, membership in statement.members
        if ident.startswith("0x")
    }


def keywords(statement: Statement) -> list[str]:
    """The keyword members (`ALL=full`, ...) of a simple statement."""
    return [f"{i}={m}" if m else i for i, m in statement.members or () if not i.startswith("0x")]


def set_members(text: str, name: str, ports: dict[str, str]) -> str:
    """Rewrite the member list of partition `name` as `GUID=membership, ...` (sorted)."""
    statement = find(parse_partitions(text), name)
    if statement is None:
        raise PartitionError(f"no partition named {name!r}")
    if statement.members is None or keywords(statement):
        raise PartitionError(f"partition {name!r}: member list is not port GUIDs only")
    items = [f"    {guid}={membership}" for guid, membership in sorted(ports.items())]
    # OpenSM reads a statement over several lines, but a line holding only ';' is a parse error that
    # makes it drop every partition; the ';' ends the last member's line.
    body = ":\n" + ",\n".join(items) + " ;" if items else ": ;"
    return text[: statement.colon] + body + text[statement.end :]
