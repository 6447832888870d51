"""Slurm hostlist expressions (`node[0001-0003,0007],spare1`) and OpenSM `VL:weight` lists."""

from __future__ import annotations

from foundation.hostlist import expand_hostlist as scheduler_hostlist
from foundation.hostlist import split_top_level
from simulator.cluster.errors import ControlError


def expand_hostlist(text: str) -> list[str]:
    """Expand a hostlist expression into names, keeping the zero padding of each range (the scheduler
    exporter's expansion; blanks around items and empty items are tolerated here, as in control input)."""
    try:
        items = [item.strip() for item in split_top_level(text) if item.strip()]
        return [name for item in items for name in scheduler_hostlist(item)]
    except ValueError as exc:
        raise ControlError(f"hostlist {text!r}: {exc}") from None


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
