"""iblinkinfo -l parsing: every port's logical and physical state, CAs found by port GUID."""

from __future__ import annotations

from exporter.fabric.linkinfo import parse_iblinkinfo
from exporter.fabric.model import PortState
from exporter.fabric.topology import parse_ibnetdiscover
from tests.exporter.fabric.helpers import LEAF1, NODE1, SPINE1, data


def test_states_of_every_port() -> None:
    topology, _ = parse_ibnetdiscover(data("ibnetdiscover.txt"))
    states, skipped = parse_iblinkinfo(data("iblinkinfo.txt"), topology)
    assert skipped == 0
    assert len(states) == 3 * 6 + 4
    assert states[(LEAF1, 1)] == PortState(4, 5)
    assert states[(LEAF1, 4)] == PortState(1, 2)
    assert states[(SPINE1, 6)] == PortState(1, 2)
    assert states[(NODE1, 1)] == PortState(4, 5)  # the line names the port GUID 0x...100001


def test_unknown_guid_state_or_garbage_is_skipped_and_counted() -> None:
    topology, _ = parse_ibnetdiscover(data("ibnetdiscover.txt"))
    line = data("iblinkinfo.txt").splitlines()[0]
    text = "\n".join(
        [
            line.replace("0x0000000000100007", "0x00000000deadbeef"),
            line.replace("Active/  LinkUp", "Bogus/  Nope"),
            "not a line at all",
            line.replace("Active/  LinkUp", "Initialize/  LinkUp"),
        ]
    )
    states, skipped = parse_iblinkinfo(text, topology)
    assert skipped == 3
    assert list(states.values()) == [PortState(2, 5)]


def test_numbers_out_of_range_are_skipped_and_counted() -> None:
    topology, _ = parse_ibnetdiscover(data("ibnetdiscover.txt"))
    leaf2_port1 = data("iblinkinfo.txt").splitlines()[2]  # leaf2 (6 ports, LID 4) port 1
    assert leaf2_port1.startswith('0x0000000000200002 "') and "4    1[  ]" in leaf2_port1
    garbage = [
        leaf2_port1.replace("4    1[  ]", "4    99999999999[  ]"),
        leaf2_port1.replace("4    1[  ]", "4    0[  ]"),
        leaf2_port1.replace("4    1[  ]", "4    7[  ]"),  # leaf2 has 6 ports
        leaf2_port1.replace("4    1[  ]", "49152    1[  ]"),  # a multicast LID
        leaf2_port1.replace("0x0000000000200002", "0x100000000000200002", 1),  # 68 bits
    ]
    states, skipped = parse_iblinkinfo("\n".join([*garbage, leaf2_port1]), topology)
    assert skipped == len(garbage)
    assert list(states) == [("0x0000000000200002", 1)]
