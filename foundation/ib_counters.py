"""The InfiniBand port counters, written down once: sysfs file, PMA field, width, data multiplier.

Every other counter list (the node exporter's catalog and range checks, the perfquery parser, the
simulated sysfs tree, ibsim and the simulated fabric) is derived from `PORT_COUNTERS` and
`LEGACY_COUNTERS`. Widths are the InfiniBand Architecture's; docs/node-exporter.md explains them.
"""

from __future__ import annotations

from dataclasses import dataclass

WIDEST_BITS = 64


@dataclass(frozen=True, slots=True)
class IbCounter:
    """One port counter.

    `bits`: its width in PortCounters (64 for one only PortCountersExtended has); `basic`: PortCounters
    has it (perfquery without -x); `extended`: PortCountersExtended has it, 64 bits wide, and the kernel
    shows that value when the HCA supports the attribute; `multiplier`: the sysfs value times this is
    the metric's unit (data counters count 4-byte words).
    """

    sysfs: str
    pma: str | None  # the field as perfquery prints it; None when no PMA attribute has it
    bits: int
    basic: bool
    extended: bool
    multiplier: int = 1

    @property
    def sysfs_bits(self) -> int:
        """The widest value the sysfs file can show."""
        return WIDEST_BITS if self.extended else self.bits

    @property
    def sysfs_max(self) -> int:
        """The largest value the sysfs file can hold; anything above is not a reading."""
        return (1 << self.sysfs_bits) - 1


def _basic(sysfs: str, pma: str, bits: int) -> IbCounter:
    return IbCounter(sysfs, pma, bits, basic=True, extended=False)


def _both(sysfs: str, pma: str, multiplier: int = 1) -> IbCounter:
    return IbCounter(sysfs, pma, 32, basic=True, extended=True, multiplier=multiplier)


def _wide(sysfs: str, pma: str) -> IbCounter:
    return IbCounter(sysfs, pma, WIDEST_BITS, basic=False, extended=True)


# `ports/N/counters/*`, in PortCounters order, then the PortCountersExtended-only ones.
PORT_COUNTERS: tuple[IbCounter, ...] = (
    _basic("symbol_error", "SymbolErrorCounter", 16),
    _basic("link_error_recovery", "LinkErrorRecoveryCounter", 8),
    _basic("link_downed", "LinkDownedCounter", 8),
    _basic("port_rcv_errors", "PortRcvErrors", 16),
    _basic("port_rcv_remote_physical_errors", "PortRcvRemotePhysicalErrors", 16),
    _basic("port_rcv_switch_relay_errors", "PortRcvSwitchRelayErrors", 16),
    _basic("port_xmit_discards", "PortXmitDiscards", 16),
    _basic("port_xmit_constraint_errors", "PortXmitConstraintErrors", 8),
    _basic("port_rcv_constraint_errors", "PortRcvConstraintErrors", 8),
    _basic("local_link_integrity_errors", "LocalLinkIntegrityErrors", 4),
    _basic("excessive_buffer_overrun_errors", "ExcessiveBufferOverrunErrors", 4),
    _basic("VL15_dropped", "VL15Dropped", 16),
    _both("port_xmit_data", "PortXmitData", multiplier=4),
    _both("port_rcv_data", "PortRcvData", multiplier=4),
    _both("port_xmit_packets", "PortXmitPkts"),
    _both("port_rcv_packets", "PortRcvPkts"),
    _basic("port_xmit_wait", "PortXmitWait", 32),
    _wide("unicast_xmit_packets", "PortUnicastXmitPkts"),
    _wide("unicast_rcv_packets", "PortUnicastRcvPkts"),
    _wide("multicast_xmit_packets", "PortMulticastXmitPkts"),
    _wide("multicast_rcv_packets", "PortMulticastRcvPkts"),
    # node_exporter reads it; no PMA attribute carries it
    IbCounter("port_rcv_discards", None, 16, basic=False, extended=False),
)

# mlx4's pre-4.5-kernel `ports/N/counters_ext/*`: 64-bit copies of the extended counters.
LEGACY_COUNTERS: tuple[IbCounter, ...] = (
    IbCounter("port_multicast_rcv_packets", None, WIDEST_BITS, basic=False, extended=True),
    IbCounter("port_multicast_xmit_packets", None, WIDEST_BITS, basic=False, extended=True),
    IbCounter("port_rcv_data_64", None, WIDEST_BITS, basic=False, extended=True, multiplier=4),
    IbCounter("port_rcv_packets_64", None, WIDEST_BITS, basic=False, extended=True),
    IbCounter("port_unicast_rcv_packets", None, WIDEST_BITS, basic=False, extended=True),
    IbCounter("port_unicast_xmit_packets", None, WIDEST_BITS, basic=False, extended=True),
    IbCounter("port_xmit_data_64", None, WIDEST_BITS, basic=False, extended=True, multiplier=4),
    IbCounter("port_xmit_packets_64", None, WIDEST_BITS, basic=False, extended=True),
)

BY_SYSFS: dict[str, IbCounter] = {c.sysfs: c for c in PORT_COUNTERS}
LEGACY_BY_SYSFS: dict[str, IbCounter] = {c.sysfs: c for c in LEGACY_COUNTERS}
# perfquery field (PortCounters and PortCountersExtended share names) -> sysfs name
BY_PMA_FIELD: dict[str, str] = {c.pma: c.sysfs for c in PORT_COUNTERS if c.pma is not None}
# counters 32 bits wide in PortCounters, which stick at 2^32-1 there
SATURATING_32 = frozenset(c.sysfs for c in PORT_COUNTERS if c.basic and c.bits == 32)
WIDEST_MAX = (1 << WIDEST_BITS) - 1
