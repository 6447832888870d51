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

from simulator.cluster.views import PortView

BASIC = "PortCounters"
EXTENDED = "PortCountersExtended"
PER_VL = "PortVLXmitWaitCounters"
VL_FIELD_BITS = 16
DATA_VLS = 8

# sysfs name -> (PortCounters field, bits)
BASIC_FIELDS: dict[str, tuple[str, int]] = {
    "symbol_error": ("SymbolErrorCounter", 16),
    "link_error_recovery": ("LinkErrorRecoveryCounter", 8),
    "link_downed": ("LinkDownedCounter", 8),
    "port_rcv_errors": ("PortRcvErrors", 16),
    "port_rcv_remote_physical_errors": ("PortRcvRemotePhysicalErrors", 16),
    "port_rcv_switch_relay_errors": ("PortRcvSwitchRelayErrors", 16),
    "port_xmit_discards": ("PortXmitDiscards", 16),
    "port_xmit_constraint_errors": ("PortXmitConstraintErrors", 8),
    "port_rcv_constraint_errors": ("PortRcvConstraintErrors", 8),
    "local_link_integrity_errors": ("LocalLinkIntegrityErrors", 4),
    "excessive_buffer_overrun_errors": ("ExcessiveBufferOverrunErrors", 4),
    "VL15_dropped": ("VL15Dropped", 16),
    "port_xmit_data": ("PortXmitData", 32),
    "port_rcv_data": ("PortRcvData", 32),
    "port_xmit_packets": ("PortXmitPkts", 32),
    "port_rcv_packets": ("PortRcvPkts", 32),
    "port_xmit_wait": ("PortXmitWait", 32),
}
# sysfs name -> PortCountersExtended field (64-bit)
EXTENDED_FIELDS: dict[str, str] = {
    "port_xmit_data": "PortXmitData",
    "port_rcv_data": "PortRcvData",
    "port_xmit_packets": "PortXmitPkts",
    "port_rcv_packets": "PortRcvPkts",
    "unicast_xmit_packets": "PortUnicastXmitPkts",
    "unicast_rcv_packets": "PortUnicastRcvPkts",
    "multicast_xmit_packets": "PortMultiCastXmitPkts",
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
