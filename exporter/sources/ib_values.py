"""What InfiniBand sysfs files say, parsed: bytes in, a value (or the reason there is none) out.

Pure functions, no I/O. A value that does not parse gives None (or a reason); `content_reason` names the
fault for the read-error counter. A counter above its width (foundation.ib_counters) is rejected, not
clipped: no HCA shows it, so the file is broken.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

from foundation import ib_counters

_RATE_RE = re.compile(r"\((\d+)X\s*([A-Za-z0-9]*)\)")
_GUID_GROUPS = 4

# The largest value each `counters/` file can hold; other counter files (hw_counters, counters_ext,
# a counter this table does not know) are 64 bits wide.
COUNTER_LIMITS: dict[str, int] = {c.sysfs: c.sysfs_max for c in ib_counters.PORT_COUNTERS}
WIDEST = ib_counters.WIDEST_MAX


@dataclass(frozen=True, slots=True)
class RateInfo:
    """A parsed `rate` file."""

    bytes_per_second: int
    width_lanes: int | None
    speed: str | None


@lru_cache(maxsize=256)
def parse_state(raw: bytes) -> tuple[int, str] | None:
    """`4: ACTIVE` -> (4, "ACTIVE"); None when it is not `ID: NAME` (node_exporter's rule)."""
    id_part, sep, name = raw.partition(b":")
    if not sep or b":" in name:
        return None
    try:
        state_id = int(id_part)
    except ValueError:
        return None
    if state_id < 0:
        return None
    return state_id, name.strip().decode("utf-8", "replace")


@lru_cache(maxsize=256)
def parse_rate(raw: bytes) -> RateInfo | None:
    """`400 Gb/sec (4X NDR)` -> bytes/s (as node_exporter: float32 Gb/s x 125e6, truncated), 4, NDR."""
    text = raw.decode("utf-8", "replace").strip()
    number, sep, rest = text.partition(" ")
    if not sep:
        return None
    try:
        gbps = float(number)
    except ValueError:
        return None
    if not gbps >= 0 or gbps == float("inf"):
        return None
    gbps32: float = struct.unpack("f", struct.pack("f", gbps))[0]
    match = _RATE_RE.search(rest)
    width = int(match.group(1)) if match else None
    speed = (match.group(2) or None) if match else None
    return RateInfo(int(gbps32 * 125_000_000), width, speed)


def parse_guid(text: str) -> str | None:
    """`0a7f:bc12:45ef:d23b` -> `0x0a7fbc1245efd23b`; None for garbage."""
    groups = text.strip().split(":")
    if len(groups) != _GUID_GROUPS or not all(len(g) == 4 for g in groups):
        return None
    try:
        value = int("".join(groups), 16)
    except ValueError:
        return None
    return f"0x{value:016x}"


def parse_gid_port_guid(text: str) -> str | None:
    """The port GUID (low 64 bits) of a GID such as `fe80:0000:0000:0000:0a7f:bc12:45ef:d23c`."""
    groups = text.strip().split(":")
    if len(groups) != 2 * _GUID_GROUPS:
        return None
    guid = parse_guid(":".join(groups[_GUID_GROUPS:]))
    return None if guid is None or guid == "0x" + "0" * 16 else guid


def content_reason(raw: bytes) -> str:
    """Why `raw` is no value: `empty`, `not_available` (the driver's `N/A`) or `garbage`."""
    text = raw.strip()
    if not text:
        return "empty"
    return "not_available" if text.startswith(b"N/A") else "garbage"


def parse_counter(raw: bytes, limit: int) -> int | str:
    """A counter file's value when it lies in 0..`limit`, else the reason it is skipped."""
    try:
        value = int(raw)
    except ValueError:
        return content_reason(raw)
    if value < 0:
        return "garbage"
    return value if value <= limit else "out_of_range"
