"""Rewriting slurm.conf: only the partitions' Nodes= change; written atomically, restorable."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from scheduler_hooks.errors import SlurmConfError
from scheduler_hooks.slurm.slurmconf import (
    SlurmConfFile,
    check_editable,
    partition_nodes,
    set_partition_nodes,
)

DATA = Path(__file__).parent / "data"
TEXT = (DATA / "slurm.conf").read_text()


def _changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert len(old_lines) == len(new_lines)
    return [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]


def test_only_the_nodes_values_change() -> None:
    new = set_partition_nodes(
        TEXT, {"training": ["node1", "node2", "node3"], "inference": ["node4", "node5"]}
    )
    assert _changed_lines(TEXT, new) == [
        (
            "PartitionName=training  Nodes=node[1-4] Default=YES MaxTime=INFINITE State=UP   # big pool\n",
            "PartitionName=training  Nodes=node[1-3] Default=YES MaxTime=INFINITE State=UP   # big pool\n",
        ),
        (
            'partitionname=inference nodes="node[5-8]" MaxTime=INFINITE State=UP\n',
            "partitionname=inference Nodes=node[4-5] MaxTime=INFINITE State=UP\n",
        ),
    ]
    assert partition_nodes(new)["training"] == ("node1", "node2", "node3")
    assert partition_nodes(new)["inference"] == ("node4", "node5")


def test_nodes_added_to_a_line_without_them_and_removed_when_empty() -> None:
    new = set_partition_nodes(TEXT, {"spare": ["node8"], "training": []})
    assert _changed_lines(TEXT, new) == [
        (
            "PartitionName=training  Nodes=node[1-4] Default=YES MaxTime=INFINITE State=UP   # big pool\n",
            "PartitionName=training Default=YES MaxTime=INFINITE State=UP   # big pool\n",
        ),
        ("PartitionName=spare Default=NO\n", "PartitionName=spare Nodes=node8 Default=NO\n"),
    ]


def test_comments_defaults_and_crlf_are_left_alone() -> None:
    text = TEXT.replace("\n", "\r\n")
    new = set_partition_nodes(text, {"training": ["node1"]})
    assert "#PartitionName=training Nodes=node[1-8]\r\n" in new
    assert "PartitionName=DEFAULT MaxTime=INFINITE State=UP\r\n" in new
    assert new.count("\r\n") == text.count("\r\n")


def test_every_unsafe_partition_is_named() -> None:
    problems = check_editable(TEXT, ["long", "twice", "missing", "training"])
    assert len(problems) == 3
    assert "continues" in problems[0] and "line 11" in problems[0]
    assert "several slurm.conf lines (13, 14)" in problems[1]
    assert "no PartitionName line" in problems[2] and "Include" in problems[2]
    with pytest.raises(SlurmConfError):
        set_partition_nodes(TEXT, {"long": ["node1"]})


def test_update_keeps_the_previous_version_and_restore_puts_it_back(tmp_path: Path) -> None:
    path, backup = tmp_path / "slurm.conf", tmp_path / "slurm.conf.prev"
    path.write_text(TEXT)
    path.chmod(0o640)
    conf = SlurmConfFile(path, backup)
    detail = conf.update({"training": ["node1", "node2"]})
    assert backup.read_text() == TEXT
    assert partition_nodes(path.read_text())["training"] == ("node1", "node2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert detail["unchanged"] is False
    assert conf.restore(detail, {"training": ["node1", "node2", "node3", "node4"]}) == "backup"
    assert path.read_text() == TEXT
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary files left


def test_restore_re_edits_a_file_changed_since(tmp_path: Path) -> None:
    path = tmp_path / "slurm.conf"
    path.write_text(TEXT)
    conf = SlurmConfFile(path, tmp_path / "prev")
    detail = conf.update({"training": ["node1", "node2"]})
    path.write_text(path.read_text() + "# an admin's later edit\n")
    assert conf.restore(detail, {"training": ["node1", "node2", "node3", "node4"]}) == "edited"
    assert path.read_text() == TEXT + "# an admin's later edit\n"
    assert conf.restore(detail, {"training": ["node1", "node2", "node3", "node4"]}) == "unchanged"


def test_update_to_the_same_lists_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "slurm.conf"
    path.write_text(TEXT)
    conf = SlurmConfFile(path, tmp_path / "prev")
    assert conf.update({"training": ["node4", "node3", "node2", "node1"]})["unchanged"] is True
    assert not (tmp_path / "prev").exists()


def test_unreadable_file_is_a_conf_error(tmp_path: Path) -> None:
    with pytest.raises(SlurmConfError):
        SlurmConfFile(tmp_path / "absent.conf", tmp_path / "prev").read()
