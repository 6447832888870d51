"""Link width and speed names to the signalling rate the node side reports.

The kernel's sysfs `rate` (what the node exporter reads) is lanes times the per-lane rate below in Gb/s,
so `4xEDR` is 100 Gb/s, 12.5e9 bytes per second, on both sides.
"""

from __future__ import annotations

LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}


def rate_bytes_per_second(width: int | None, speed: str | None) -> int | None:
    """Bytes per second of a `width`-lane link at `speed` ("EDR", ...); None when either is unknown."""
    if width is None or speed is None or width <= 0:
        return None
    lane = LANE_GBPS.get(speed.upper())
    if lane is None:
        return None
    return int(width * lane * 125_000_000)
