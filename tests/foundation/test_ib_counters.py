"""The one counter table and the lists derived from it."""

from __future__ import annotations

from exporter import catalog
from exporter.fabric.perfquery import COUNTER_FIELDS
from foundation import ib_counters
from simulator import sysfs_tree
from simulator.backends import ibsim_counters
from simulator.serve import fabric_source


def test_widths_are_the_iba_ones() -> None:
    by = ib_counters.BY_SYSFS
    assert (by["symbol_error"].sysfs_max, by["link_downed"].sysfs_max) == (2**16 - 1, 2**8 - 1)
    assert by["local_link_integrity_errors"].sysfs_max == 15
    assert by["port_xmit_wait"].sysfs_max == 2**32 - 1  # PortCountersExtended has no wait counter
    assert by["port_xmit_data"].bits == 32 and by["port_xmit_data"].sysfs_max == 2**64 - 1
    assert by["unicast_rcv_packets"].sysfs_max == 2**64 - 1 and not by["unicast_rcv_packets"].basic
    assert {c.sysfs for c in ib_counters.PORT_COUNTERS if c.multiplier != 1} == {
        "port_xmit_data",
        "port_rcv_data",
    }
    assert {
        "port_xmit_data",
        "port_rcv_data",
        "port_xmit_packets",
        "port_rcv_packets",
        "port_xmit_wait",
    } == ib_counters.SATURATING_32


def test_every_list_is_derived_from_the_table() -> None:
    names = {c.sysfs for c in ib_counters.PORT_COUNTERS}
    assert set(catalog.IB_COUNTERS) == names
    assert set(catalog.IB_LEGACY_COUNTERS) == {c.sysfs for c in ib_counters.LEGACY_COUNTERS}
    assert set(sysfs_tree.COUNTERS) == names
    assert set(COUNTER_FIELDS.values()) == names - {"port_rcv_discards"}
    assert COUNTER_FIELDS["PortXmitPkts"] == "port_xmit_packets"
    assert ibsim_counters.BASIC_FIELDS["symbol_error"] == ("SymbolErrorCounter", 16)
    assert ibsim_counters.EXTENDED_FIELDS["multicast_xmit_packets"] == "PortMultiCastXmitPkts"
    assert set(fabric_source.BASIC) == set(ibsim_counters.BASIC_FIELDS)
    assert len(fabric_source.EXTENDED) == 8


def test_the_catalog_takes_its_multipliers_from_the_table() -> None:
    assert catalog.IB_COUNTERS["port_rcv_data"][1] == 4
    assert catalog.IB_LEGACY_COUNTERS["port_xmit_data_64"][1] == 4
    assert catalog.IB_COUNTERS["symbol_error"][1] == 1
