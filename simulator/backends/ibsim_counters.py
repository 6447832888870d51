"""Which PMA field of ibsim holds each of the model's port counters, and how wide it is.

Keys are the sysfs counter names of `PortView.counters`. Error counters and PortXmitWait live in
PortCounters at their IBA widths (values above saturate, as ibsim itself stores them); data and packet
counters go to PortCountersExtended (64-bit) and, saturated at 32 bits, to PortCounters too (ibsim keeps the
two attributes apart). Per-VL waits go to `PortVLXmitWaitCounters.PortVLXmitWaitCountersN`, a 16-bit field
in IBA and in ibsim, so the model's 32-bit per-VL wait is written saturated at 65535.
`multicast_rcv_packets` is not mirrored: ibsim 0.10 takes `PortMultiCastRcvPkts` but never serves it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from foundation.ib_counters import PORT_COUNTERS
from simulator.cluster.views import PortView

BASIC = "PortCounters"
EXTENDED = "PortCountersExtended"
PER_VL = "PortVLXmitWaitCounters"
VL_FIELD_BITS = 16
DATA_VLS = 8

# ibsim's console spells two PortCountersExtended fields its own way; it never serves PortMultiCastRcvPkts.
_IBSIM_SPELLING = {
    "PortMulticastXmitPkts": "PortMultiCastXmitPkts",
    "PortMulticastRcvPkts": "PortMultiCastRcvPkts",
}
_NOT_MIRRORED = frozenset({"multicast_rcv_packets"})
_MIRRORED = [(c, c.pma) for c in PORT_COUNTERS if c.pma is not None and c.sysfs not in _NOT_MIRRORED]
# sysfs name -> (PortCounters field, bits)
BASIC_FIELDS: dict[str, tuple[str, int]] = {
    c.sysfs: (_IBSIM_SPELLING.get(pma, pma), c.bits) for c, pma in _MIRRORED if c.basic
}
# sysfs name -> PortCountersExtended field (64-bit)
EXTENDED_FIELDS: dict[str, str] = {
    c.sysfs: _IBSIM_SPELLING.get(pma, pma) for c, pma in _MIRRORED if c.extended
}


@dataclass(frozen=True)
class FieldValue:
    """One PMA field of one port, with the value ibsim should hold."""

    desc: str
    port: int
    attribute: str
    field: str
    value: int

    @property
    def key(self) -> tuple[str, int, str, str]:
        """What identifies the field."""
        return (self.desc, self.port, self.attribute, self.field)

    def command(self) -> str:
        """The console command that sets it."""
        return f'PerformanceSet "{self.desc}"[{self.port}] {self.attribute}.{self.field}={self.value}'


def saturate(value: int, bits: int) -> int:
    """`value` as a counter of `bits` bits shows it (stuck at all ones)."""
    return min(max(value, 0), (1 << bits) - 1)


def port_fields(view: PortView) -> Iterator[FieldValue]:
    """Every mirrored field of one port, with the model's value."""
    desc, port, counters = view.node_desc, view.port, view.counters
    for name, (field, bits) in BASIC_FIELDS.items():
        yield FieldValue(desc, port, BASIC, field, saturate(counters.get(name, 0), bits))
    for name, field in EXTENDED_FIELDS.items():
        yield FieldValue(desc, port, EXTENDED, field, saturate(counters.get(name, 0), 64))
    for vl, value in enumerate(view.vl_xmit_wait[:DATA_VLS]):
        yield FieldValue(desc, port, PER_VL, f"PortVLXmitWaitCounters{vl}", saturate(value, VL_FIELD_BITS))
