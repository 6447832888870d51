"""Host lists, array task strings, GRES/TRES strings and node-state normalisation."""

from __future__ import annotations

import pytest

from exporter.scheduler.gres import gres_count, tres_count
from exporter.scheduler.states import NODE_STATES, normalise_node_state
from foundation.hostlist import count_array_tasks, expand_hostlist


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", []),
        ("(null)", []),
        ("node1", ["node1"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node[1-2,5],gpu7", ["node1", "node2", "node5", "gpu7"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("r[1-2]-n[01-02]", ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]),
        ("a[3],b", ["a3", "b"]),
    ],
)
def test_expand_hostlist(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    "text", ["node[1-", "node]1", "node[3-1]", "node[a-b]", "a,,b", "node[1-2", "n[1-9999999]"]
)
def test_expand_hostlist_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        expand_hostlist(text)


@pytest.mark.parametrize(
    ("text", "count"),
    [("0-3", 4), ("0-99%10", 100), ("1,3,5-7", 5), ("0-15:4", 4), ("7", 1), ("[0-1]", 2)],
)
def test_count_array_tasks(text: str, count: int) -> None:
    assert count_array_tasks(text) == count


@pytest.mark.parametrize("text", ["", "%4", "a-b", "3-1", "0-4:0", "1,,2"])
def test_count_array_tasks_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        count_array_tasks(text)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        (None, 0),
        ("", 0),
        ("(null)", 0),
        ("N/A", 0),
        ("gpu:8", 8),
        ("gpu", 1),
        ("gpu:a100", 1),
        ("gpu:a100:4(S:0-1),gpu:v100:4(S:1)", 8),
        ("gpu:2(IDX:0,3)", 2),
        ("gpu:(null):0(IDX:N/A)", 0),
        ("gpu:(null):8(IDX:0-7)", 8),
        ("mps:400,gpu:4", 4),
        ("mps:100K", 0),
        ("gres:gpu:8", 8),
        ("gres/gpu:a100:2", 2),
        ("gres:gpu:8,gres:mps:100", 8),
    ],
)
def test_gres_count(text: str | None, count: int) -> None:
    assert gres_count(text) == count


@pytest.mark.parametrize("text", ["gpu:a100:x", ":8", "gpu:1,(", "gpu:8)"])
def test_gres_count_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        gres_count(text)


def test_gres_count_of_another_name() -> None:
    assert gres_count("gpu:8,nic:2", "nic") == 2


def test_tres_count() -> None:
    assert tres_count("cpu=2,mem=1000M,node=2,gres/gpu=16,gres/gpu:a100=16") == 16
    assert tres_count("cpu=2,node=2,billing=2") is None
    assert tres_count(None) is None
    with pytest.raises(ValueError):
        tres_count("gres/gpu=lots")


@pytest.mark.parametrize(
    ("base", "flags", "state"),
    [
        ("idle", [], "idle"),
        ("mixed", [], "mixed"),
        ("allocated", [], "allocated"),
        ("ALLOC", [], "allocated"),
        ("down", [], "down"),
        ("down", ["DRAIN"], "down"),
        ("idle", ["NOT_RESPONDING"], "down"),
        ("idle", ["DRAIN"], "drained"),
        ("mixed", ["DRAIN"], "draining"),
        ("idle", ["DRAIN", "COMPLETING"], "draining"),
        ("idle", ["FAIL"], "fail"),
        ("allocated", ["FAIL"], "failing"),
        ("idle", ["INVALID_REG"], "invalid"),
        ("error", [], "error"),
        ("idle", ["MAINTENANCE", "RESERVED"], "maint"),
        ("idle", ["REBOOT_REQUESTED"], "reboot"),
        ("mixed", ["REBOOT_REQUESTED"], "mixed"),
        ("idle", ["POWERED_DOWN"], "powered_down"),
        ("idle", ["POWERING_DOWN"], "powering_down"),
        ("idle", ["POWERING_UP"], "powering_up"),
        ("idle", ["COMPLETING"], "completing"),
        ("idle", ["RESERVED"], "reserved"),
        ("idle", ["PLANNED"], "planned"),
        ("future", [], "future"),
        ("unknown", [], "unknown"),
        ("SOMETHING_NEW", ["ANOTHER"], "unknown"),
    ],
)
def test_normalise_node_state(base: str, flags: list[str], state: str) -> None:
    assert normalise_node_state(base, flags) == state
    assert state in NODE_STATES
