"""The `ibroute -n` parser on captured output (OpenSM on ibsim) and on garbage."""

from __future__ import annotations

import pytest

from exporter.fabric.ibroute import parse_ibroute
from tests.exporter.fabric.helpers import LEAF1, SPINE1, data

LEAF1_TABLE = {1: 1, 2: 3, 3: 0, 4: 3, 5: 2, 6: 3, 7: 3}  # node1 (LID 1) port 1, node2 (5) port 2, rest up


def test_a_captured_table_reads_exactly() -> None:
    parsed = parse_ibroute(data("ibroute_leaf1.txt"), LEAF1, 3, 6)
    assert (parsed.ports, parsed.skipped, parsed.error) == (LEAF1_TABLE, 0, None)
    spine = parse_ibroute(data("ibroute_spine1.txt"), SPINE1, 2, 6)
    assert spine.error is None and spine.ports == {1: 1, 2: 0, 3: 1, 4: 2, 5: 1, 6: 2, 7: 2}


def test_destination_notes_and_port_255_are_understood() -> None:
    text = data("ibroute_leaf1.txt").replace(
        "0x0001 001 \n", "0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'node1')\n"
    )
    text = text.replace("0x0007 003 \n", "0x0007 255 \n")  # `ibroute -a`: no route to LID 7
    parsed = parse_ibroute(text, LEAF1, 3, 6)
    assert parsed.error is None and parsed.ports == {k: v for k, v in LEAF1_TABLE.items() if k != 7}


@pytest.mark.parametrize(
    ("edit", "why", "skipped"),
    [
        (("0x0005 002 \n", "0x0005 0#2 \n"), "6 of the 7 entries", 1),
        (("0x0005 002 \n", "0x0005 007 \n"), "6 of the 7 entries", 1),  # port 7 on a 6-port switch
        (("0x0005 002 \n", "0xc000 002 \n"), "6 of the 7 entries", 1),  # multicast range, not a LID
        (("0x0005 002 \n", "0x0004 002 \n"), "6 of the 7 entries", 1),  # LID 4 listed twice
        (("7 valid lids dumped \n", ""), "cut short", 0),
        (("Lid 3 guid", "Lid 4 guid"), "not of LID 3", 0),
        (("guid 0x0000000000200001", "guid 0x0000000000200002"), "not of LID 3", 0),
        (("Unicast lids", "Unicorn lids"), "no forwarding table", 8),  # the header and 7 entries
    ],
    ids=[
        "garbled",
        "port-range",
        "lid-range",
        "duplicate",
        "truncated",
        "other-lid",
        "other-guid",
        "no-header",
    ],
)
def test_an_incomplete_or_foreign_table_is_refused(edit: tuple[str, str], why: str, skipped: int) -> None:
    text = data("ibroute_leaf1.txt")
    assert edit[0] in text
    parsed = parse_ibroute(text.replace(edit[0], edit[1], 1), LEAF1, 3, 6)
    assert parsed.error is not None and why in parsed.error
    assert parsed.skipped == skipped


def test_nothing_and_error_text_are_refused() -> None:
    assert parse_ibroute("", LEAF1, 3, 6).error == "no forwarding table in the output"
    failed = parse_ibroute("ibroute: iberror: failed: dump tables: not a switch\n", LEAF1, 3, 6)
    assert failed.error == "no forwarding table in the output" and failed.skipped == 1
    huge = data("ibroute_leaf1.txt").replace("0x0005 002 ", "0x0005 " + "9" * 5000)
    assert parse_ibroute(huge, LEAF1, 3, 6).skipped == 1
