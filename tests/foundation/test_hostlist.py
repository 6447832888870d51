"""compress_hostlist (added to exporter/scheduler/hostlist.py for slurm.conf) round-trips with expand."""

from __future__ import annotations

import pytest

from foundation.hostlist import compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    ("names", "text"),
    [
        ([], ""),
        (["node5"], "node5"),
        (["node1", "node2", "node3", "node7", "gpu01"], "gpu01,node[1-3,7]"),
        ([f"node{i}" for i in range(1, 12)], "node[1-11]"),
        (["node08", "node09", "node10"], "node[08-09,10]"),
        (["node1", "node01"], "node[01,1]"),
        (["login", "node", "node2", "node2"], "login,node,node2"),
        (["r1-n01", "r1-n02", "r2-n01"], "r1-n[01-02],r2-n01"),
        (["7", "8"], "[7-8]"),
    ],
)
def test_compress(names: list[str], text: str) -> None:
    assert compress_hostlist(names) == text
    assert sorted(expand_hostlist(text)) == sorted(set(names))


@pytest.mark.parametrize("name", ["", "node[1]", "a,b", "a b"])
def test_compress_refuses_non_names(name: str) -> None:
    with pytest.raises(ValueError):
        compress_hostlist([name])
