"""Slurm hostlist expressions (`node[0001-0003,0007],spare1`) and OpenSM `VL:weight` lists."""

from __future__ import annotations

import re

from simulator.cluster.errors import ControlError

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Expand a hostlist expression into names, keeping the zero padding of each range."""
    names: list[str] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            continue
        if "[" not in part:
            names.append(part)
            continue
        prefix, _, rest = part.partition("[")
        body, close, suffix = rest.partition("]")
        if not close:
            raise ControlError(f"hostlist {text!r}: unclosed '['")
        for item in body.split(","):
            match = _RANGE.match(item.strip())
            if not match:
                raise ControlError(f"hostlist {text!r}: bad range {item!r}")
            first, last = match.group(1), match.group(2) or match.group(1)
            width = len(first)
            if int(last) < int(first):
                raise ControlError(f"hostlist {text!r}: range {item!r} goes down")
            names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(int(first), int(last) + 1)]
    return names


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def parse_vlarb(text: str) -> list[tuple[int, int]]:
    """Parse OpenSM's `qos_vlarb_high`/`qos_vlarb_low` value, e.g. `0:4,1:64` (decimal or 0x hex)."""
    pairs = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        vl, sep, weight = item.partition(":")
        try:
            if not sep:
                raise ValueError(item)
            pairs.append((int(vl, 0), int(weight, 0)))
        except ValueError:
            raise ControlError(f"VL arbitration {text!r}: {item!r} is not VL:weight") from None
    return pairs
