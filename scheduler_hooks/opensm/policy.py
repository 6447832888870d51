"""OpenSM's QoS policy file: a line-based reader and the two edits ibpool makes, keeping the rest as is.

A pool is the port group with the pool's name; its SL is that of the qos-level OpenSM picks for a plain
path between two of its ports. Changing it edits that level in place when only this pool's rules use it,
else adds a level `ibpool-<pool>` and its rule at the top of qos-match-rules. Members are rewritten as one
`port-guid` entry. How OpenSM picks the level: docs/apply.md ("The OpenSM side").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

OPENERS = {
    "port-groups": "end-port-groups",
    "port-group": "end-port-group",
    "qos-setup": "end-qos-setup",
    "vlarb-tables": "end-vlarb-tables",
    "vlarb-scope": "end-vlarb-scope",
    "sl2vl-tables": "end-sl2vl-tables",
    "sl2vl-scope": "end-sl2vl-scope",
    "qos-levels": "end-qos-levels",
    "qos-level": "end-qos-level",
    "qos-match-rules": "end-qos-match-rules",
    "qos-match-rule": "end-qos-match-rule",
    "qos-ulps": "end-qos-ulps",
}
CLOSERS = {end: start for start, end in OPENERS.items()}
BLOCKS = ("port-group", "vlarb-scope", "sl2vl-scope", "qos-level", "qos-match-rule")
DEFAULT_LEVEL = "DEFAULT"
MEMBER_KEYS = ("port-guid", "port-name")
DYNAMIC_KEYS = ("partition", "node-type")
RULE_CRITERIA = ("qos-class", "service-id", "pkey")
_ENTRY = re.compile(r"^([a-z][a-z-]*)\s*:(.*)$")
_ULP_DEFAULT = re.compile(r"^default\s*:\s*(\d+)$")


class PolicyError(ValueError):
    """The policy file cannot be read or edited the way ibpool needs."""


@dataclass
class Entry:
    """`key: value` (the value may continue on the following lines)."""

    key: str
    value: str
    first: int
    last: int


@dataclass
class Block:
    """A port-group, qos-level, qos-match-rule, ... from its opening line to its `end-` line."""

    kind: str
    first: int
    last: int = -1
    entries: list[Entry] = field(default_factory=list)

    def get(self, key: str) -> str | None:
        """The first value of `key`, stripped."""
        for entry in self.entries:
            if entry.key == key:
                return entry.value.strip()
        return None

    def values(self, key: str) -> list[str]:
        """Every comma-separated item of every `key` entry."""
        items: list[str] = []
        for entry in self.entries:
            if entry.key == key:
                items.extend(v.strip() for v in entry.value.split(",") if v.strip())
        return items

    @property
    def name(self) -> str | None:
        """The `name:` entry."""
        return self.get("name")


@dataclass
class Policy:
    """A parsed policy file: its lines and blocks in file order."""

    lines: list[str]
    blocks: list[Block]
    sections: dict[str, list[tuple[int, int]]]
    ulps: list[tuple[int, str]]

    def of(self, kind: str) -> list[Block]:
        """Blocks of one kind, in order."""
        return [b for b in self.blocks if b.kind == kind]

    def port_group(self, name: str) -> Block | None:
        """The port group called `name`."""
        return next((b for b in self.of("port-group") if b.name == name), None)

    def level(self, name: str) -> Block | None:
        """The qos-level called `name`."""
        return next((b for b in self.of("qos-level") if b.name == name), None)

    def default_sl(self) -> int | None:
        """The SL of the DEFAULT level, else of the qos-ulps `default`; None if neither exists."""
        level = self.level(DEFAULT_LEVEL)
        if level is not None:
            return _sl(level)
        for _, text in self.ulps:
            match = _ULP_DEFAULT.match(text)
            if match:
                return int(match.group(1))
        return None

    def effective_level(self, group: str) -> Block | None:
        """The qos-level OpenSM uses for a path between two ports of `group` (None: the default)."""
        for rule in self.of("qos-match-rule"):
            if any(rule.get(key) is not None for key in RULE_CRITERIA):
                continue
            sources, destinations = rule.values("source"), rule.values("destination")
            if (sources and group not in sources) or (destinations and group not in destinations):
                continue
            name = rule.get("qos-level-name")
            return self.level(name) if name else None
        return None

    def group_sl(self, group: str) -> int | None:
        """The SL of a path between two ports of `group` (None when the policy defines none)."""
        level = self.effective_level(group)
        return _sl(level) if level is not None else self.default_sl()

    def owned_by(self, level: str, group: str) -> bool:
        """True when every rule using `level` concerns only `group` (so editing it touches no other pool)."""
        users = [r for r in self.of("qos-match-rule") if r.get("qos-level-name") == level]
        return (
            level != DEFAULT_LEVEL
            and bool(users)
            and all(r.values("source") == [group] and r.values("destination") in ([], [group]) for r in users)
        )

    def text(self) -> str:
        """The file text."""
        return "\n".join(self.lines) + "\n"


def _sl(level: Block) -> int | None:
    value = level.get("sl")
    return int(value) if value is not None and value.isdigit() else None


def parse_policy(text: str) -> Policy:
    """Parse the policy file; PolicyError names the first line ibpool cannot follow."""
    lines = text.splitlines()
    blocks: list[Block] = []
    sections: dict[str, list[tuple[int, int]]] = {}
    ulps: list[tuple[int, str]] = []
    stack: list[tuple[str, int]] = []
    block: Block | None = None
    entry: Entry | None = None
    for number, raw in enumerate(lines):
        code = raw.split("#", 1)[0].strip()
        if not code:
            continue
        where = f"line {number + 1}"
        if code in OPENERS:
            if code in BLOCKS:
                if block is not None:
                    raise PolicyError(f"{where}: {code} inside {block.kind}")
                block = Block(code, number)
            stack.append((code, number))
            entry = None
            continue
        if code in CLOSERS:
            if not stack or stack[-1][0] != CLOSERS[code]:
                raise PolicyError(f"{where}: {code} without {CLOSERS[code]}")
            opened, first = stack.pop()
            if block is not None and opened == block.kind:
                block.last = number
                blocks.append(block)
                block = None
            elif opened not in BLOCKS:
                sections.setdefault(opened, []).append((first, number))
            entry = None
            continue
        if stack and stack[-1][0] == "qos-ulps":
            ulps.append((number, code))
            continue
        match = _ENTRY.match(code)
        if block is not None and match:
            entry = Entry(match.group(1), match.group(2).strip(), number, number)
            block.entries.append(entry)
        elif entry is not None and entry.value.endswith(","):
            entry.value = f"{entry.value} {code}"
            entry.last = number
        else:
            raise PolicyError(f"{where}: cannot read {code[:60]!r}")
    if stack:
        raise PolicyError(f"{stack[-1][0]} opened on line {stack[-1][1] + 1} is never closed")
    return Policy(lines, blocks, sections, ulps)


# --- edits -----------------------------------------------------------------------------------------


def _indent(policy: Policy, block: Block) -> str:
    if block.entries:
        line = policy.lines[block.entries[0].first]
        return line[: len(line) - len(line.lstrip())]
    line = policy.lines[block.first]
    return line[: len(line) - len(line.lstrip())] + "    "


def set_group_members(text: str, group: str, guids: list[str]) -> str:
    """Replace the group's port-guid/port-name entries with one port-guid entry listing `guids`."""
    policy = parse_policy(text)
    block = policy.port_group(group)
    if block is None:
        raise PolicyError(f"no port-group named {group!r}")
    dynamic = [e.key for e in block.entries if e.key in DYNAMIC_KEYS]
    if dynamic:
        raise PolicyError(f"port-group {group!r} also selects ports by {', '.join(dynamic)}")
    indent = _indent(policy, block)
    old = [e for e in block.entries if e.key in MEMBER_KEYS]
    at = old[0].first if old else block.last
    drop = {n for e in old for n in range(e.first, e.last + 1)}
    new_line = [f"{indent}port-guid: {', '.join(guids)}"] if guids else []
    lines = policy.lines
    out = [line for n, line in enumerate(lines[:at]) if n not in drop]
    out += new_line + [line for n, line in enumerate(lines[at:], at) if n not in drop]
    return "\n".join(out) + "\n"


def set_group_sl(text: str, group: str, sl: int) -> str:
    """Make paths within `group` get `sl` (docs/apply.md); PolicyError if that cannot hold."""
    policy = parse_policy(text)
    if policy.port_group(group) is None:
        raise PolicyError(f"no port-group named {group!r}")
    level = policy.effective_level(group)
    if level is not None and level.name and policy.owned_by(level.name, group):
        text = _set_level_sl(policy, level, sl)
    else:
        name = f"ibpool-{group}"
        existing = policy.level(name)
        if existing is not None and not policy.owned_by(name, group):
            raise PolicyError(f"qos-level {name!r} exists and is used by other rules")
        if existing is not None:
            text = _set_level_sl(policy, existing, sl)
        else:
            text = _add_block(
                policy, "qos-levels", ["qos-level", f"name: {name}", f"sl: {sl}", "end-qos-level"]
            )
        text = _add_block(
            parse_policy(text),
            "qos-match-rules",
            [
                "qos-match-rule",
                f"source: {group}",
                f"destination: {group}",
                f"qos-level-name: {name}",
                "end-qos-match-rule",
            ],
            first=True,
        )
    result = parse_policy(text).group_sl(group)
    if result != sl:
        raise PolicyError(f"after the edit port-group {group!r} would get SL {result}, not {sl}")
    return text


def _set_level_sl(policy: Policy, level: Block, sl: int) -> str:
    lines = list(policy.lines)
    entry = next((e for e in level.entries if e.key == "sl"), None)
    indent = _indent(policy, level)
    if entry is not None:
        lines[entry.first : entry.last + 1] = [f"{indent}sl: {sl}"]
    else:
        lines.insert(level.last, f"{indent}sl: {sl}")
    return "\n".join(lines) + "\n"


def _add_block(policy: Policy, section: str, block: list[str], first: bool = False) -> str:
    """Insert a block into the first `section` (at its top when `first`), creating the section if absent."""
    lines = list(policy.lines)
    spans = policy.sections.get(section)
    if spans:
        start, end = spans[0]
        line = lines[start]
        base = line[: len(line) - len(line.lstrip())] + "    "
        body = [base + block[0], *(base + "    " + b for b in block[1:-1]), base + block[-1]]
        at = start + 1 if first else end
        lines[at:at] = body
    else:
        body = [f"    {block[0]}", *(f"        {b}" for b in block[1:-1]), f"    {block[-1]}"]
        lines += ["", section, *body, f"end-{section}"]
    return "\n".join(lines) + "\n"
