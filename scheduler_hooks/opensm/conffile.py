"""opensm.conf: read options and rewrite the QoS table keys, keeping every other line as it was.

Managed keys: `qos_vlarb_high`, `qos_vlarb_low` and `qos_sl2vl`, always (appended when absent), and their
per-port-type variants `qos_{ca,sw0,swe,rtr}_{vlarb_high,vlarb_low,sl2vl}` only where the file already
sets them to a value (not `(null)`): those override the generic key for that port type, so a fabric-wide
change sets them to the same value. Nothing else in the file is touched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from scheduler_hooks.opensm.targets import Kind

PORT_TYPES = ("ca", "sw0", "swe", "rtr")
BASE_KEYS: Mapping[Kind, str] = {
    Kind.VLARB_HIGH: "qos_vlarb_high",
    Kind.VLARB_LOW: "qos_vlarb_low",
    Kind.SL2VL: "qos_sl2vl",
}
_LINE = re.compile(r"^(\s*)([A-Za-z0-9_]+)(\s+)(.*?)\s*$")
_UNSET = ("", "(null)")


def parse_options(text: str) -> dict[str, str]:
    """Key -> value for every uncommented `key value` line; a later line wins, as in OpenSM."""
    options: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, _, value = stripped.partition(" ")
        options[key] = value.strip()
    return options


def is_set(value: str | None) -> bool:
    """True for a value OpenSM takes as set (not absent, empty or `(null)`)."""
    return value is not None and value.strip() not in _UNSET


def variant_keys(kind: Kind) -> list[str]:
    """The per-port-type keys for a table kind (`qos_ca_vlarb_high`, ...)."""
    suffix = BASE_KEYS[kind][len("qos_") :]
    return [f"qos_{port_type}_{suffix}" for port_type in PORT_TYPES]


def managed_keys(kind: Kind, options: Mapping[str, str]) -> list[str]:
    """The keys a change of `kind` rewrites in a file with these options."""
    return [BASE_KEYS[kind], *(k for k in variant_keys(kind) if is_set(options.get(k)))]


def set_options(text: str, updates: Mapping[str, str]) -> str:
    """Rewrite every uncommented line of each key in `updates`; append keys the file lacks."""
    lines = text.splitlines()
    done: set[str] = set()
    for number, line in enumerate(lines):
        match = _LINE.match(line)
        if match is None or match.group(2) not in updates or line.lstrip().startswith("#"):
            continue
        indent, key, gap = match.group(1), match.group(2), match.group(3)
        lines[number] = f"{indent}{key}{gap}{updates[key]}"
        done.add(key)
    missing = [key for key in updates if key not in done]
    if missing:
        lines.append("# set by ibpool")
        lines.extend(f"{key} {updates[key]}" for key in missing)
    return "\n".join(lines) + "\n"


def max_vls(options: Mapping[str, str]) -> int:
    """`qos_max_vls` as OpenSM would take it (15 when unset or unreadable)."""
    value = options.get("qos_max_vls", "")
    try:
        number = int(value, 0)
    except ValueError:
        return 15
    return number if 1 <= number <= 15 else 15
