"""The approval policy file: parsed into frozen config, every error reported at once with file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from proposals.approval_config import (
    DEFAULT_CONFIG,
    ApprovalConfig,
    AutoApprove,
    BlastRadius,
    MoveNodesBounds,
    PortGroupBounds,
    VlWeightBounds,
    load_approval_config,
)
from proposals.errors import ApprovalConfigError

GOOD = """
name: night-shift
auto_approve:
  set_vl_weights: {max_weight_change_per_vl: 16}
  move_nodes: {max_nodes: 2}
  set_port_group: {allowed_sls: [0, 1]}
limits:
  max_nodes_moved_per_hour: 4
  max_pool_share_moved: 0.25
  max_weight_change_per_step: 32
"""


def test_full_file(tmp_path: Path) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text(GOOD)
    assert load_approval_config(path) == ApprovalConfig(
        "night-shift",
        AutoApprove(VlWeightBounds(16), MoveNodesBounds(2), PortGroupBounds(frozenset({0, 1}))),
        BlastRadius(4, 0.25, 32),
    )


def test_empty_file_and_limits_only(tmp_path: Path) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text("")
    assert load_approval_config(path) == DEFAULT_CONFIG
    path.write_text("limits: {max_pool_share_moved: 1}\n")
    config = load_approval_config(path)
    assert config.limits == BlastRadius(max_pool_share_moved=1.0)
    assert config.name is None
    assert not config.auto_approve.covers("move_nodes")


def test_every_error_at_once(tmp_path: Path) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text(
        """
auto_approve:
  set_vl_weights: {max_weight_change_per_vl: 300}
  move_nodes: {}
  set_port_group: {allowed_sls: [16, x]}
  delete_everything: {}
limits:
  max_nodes_moved_per_hour: -1
  max_pool_share_moved: 2
  max_weight_change_per_step: true
  speed: 3
colour: blue
"""
    )
    with pytest.raises(ApprovalConfigError) as err:
        load_approval_config(path)
    assert err.value.problems == [
        f"{path}: colour: unknown key",
        f"{path}: auto_approve.delete_everything: unknown key",
        f"{path}: auto_approve.set_vl_weights.max_weight_change_per_vl: must be an integer 1-255, got 300",
        f"{path}: auto_approve.move_nodes.max_nodes: missing",
        f"{path}: auto_approve.set_port_group.allowed_sls: must be a non-empty list of service levels 0-15, "
        "got [16, 'x']",
        f"{path}: limits.speed: unknown key",
        f"{path}: limits.max_nodes_moved_per_hour: must be an integer >= 0, got -1",
        f"{path}: limits.max_weight_change_per_step: must be an integer 0-255, got True",
        f"{path}: limits.max_pool_share_moved: must be a number from 0 to 1, got 2",
        f"{path}: name: missing: auto-approvals are recorded as policy:<name>",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n", ": must be a mapping"),
        ("name: [x]\n", "name: must be a name"),
        ("name: 'policy:x'\n", "name: must be a name"),
        ("limits: 3\n", "limits: must be a mapping"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_single_errors(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text(text)
    with pytest.raises(ApprovalConfigError) as err:
        load_approval_config(path)
    assert any(problem in p and str(path) in p for p in err.value.problems), err.value.problems


def test_move_nodes_may_allow_reclaims(tmp_path: Path) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text("name: n\nauto_approve:\n  move_nodes: {max_nodes: 2, reclaims: true}\n")
    assert load_approval_config(path).auto_approve.move_nodes == MoveNodesBounds(2, reclaims=True)
    path.write_text("name: n\nauto_approve:\n  move_nodes: {reclaims: yes please}\n")
    with pytest.raises(ApprovalConfigError) as err:
        load_approval_config(path)
    assert err.value.problems == [
        f"{path}: auto_approve.move_nodes.max_nodes: missing",
        f"{path}: auto_approve.move_nodes.reclaims: must be true or false, got 'yes please'",
    ]


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ApprovalConfigError, match="cannot read"):
        load_approval_config(tmp_path / "missing.yaml")


def test_an_unknown_or_missing_key_does_not_hide_the_value_errors(tmp_path: Path) -> None:
    path = tmp_path / "approval.yaml"
    path.write_text(
        "name: n\nauto_approve:\n  move_nodes: {max_nodes: -1, extra: 2}\n"
        "  set_port_group: {allowed_sls: [99], typo: 1}\n"
    )
    with pytest.raises(ApprovalConfigError) as err:
        load_approval_config(path)
    assert err.value.problems == [
        f"{path}: auto_approve.move_nodes.extra: unknown key",
        f"{path}: auto_approve.move_nodes.max_nodes: must be an integer >= 1, got -1",
        f"{path}: auto_approve.set_port_group.typo: unknown key",
        f"{path}: auto_approve.set_port_group.allowed_sls: must be a non-empty list of service levels 0-15, "
        "got [99]",
    ]
