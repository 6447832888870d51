"""The apply config: sections, defaults, and every problem at once with the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from proposals.approval_config import DEFAULT_CONFIG
from scheduler_hooks.apply.cli import main as apply_main
from scheduler_hooks.apply.config import load_apply_config
from scheduler_hooks.errors import HookConfigError

GOOD = """
state_dir: /var/lib/ibpool/apply
approval_config: {approval}
opensm:
  config_file: /etc/opensm/opensm.conf
  qos_policy_file: /etc/opensm/qos-policy.conf
  partitions_file: /etc/opensm/partitions.conf
  pid_file: /run/opensm.pid
slurm:
  slurm_conf: /etc/slurm/slurm.conf
  persist: true
"""


def test_a_full_config(tmp_path: Path) -> None:
    approval = tmp_path / "approval.yaml"
    approval.write_text("limits:\n  max_nodes_moved_per_hour: 2\n")
    path = tmp_path / "apply.yaml"
    path.write_text(GOOD.format(approval=approval))
    config = load_apply_config(path)
    assert config.state_dir == Path("/var/lib/ibpool/apply") and config.sections == ("opensm", "slurm")
    assert config.opensm is not None and config.opensm.state_dir == Path("/var/lib/ibpool/apply/opensm")
    assert config.slurm is not None and config.slurm.persist
    assert config.approval.limits.max_nodes_moved_per_hour == 2 and config.approval_file == approval


def test_only_one_side_and_default_limits(tmp_path: Path) -> None:
    path = tmp_path / "apply.yaml"
    path.write_text("state_dir: /srv/apply\nslurm: {slurm_conf: /etc/slurm/slurm.conf}\n")
    config = load_apply_config(path)
    assert config.sections == ("slurm",) and config.approval is DEFAULT_CONFIG and config.opensm is None


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    approval = tmp_path / "approval.yaml"
    approval.write_text("limits:\n  max_pool_share_moved: 3\n")
    path = tmp_path / "apply.yaml"
    path.write_text(
        f"state_dir: relative\nextra: 1\napproval_config: {approval}\n"
        "opensm:\n  config_file: etc/opensm.conf\n  bogus: 1\n"
        "slurm:\n  persist: maybe\n"
    )
    with pytest.raises(HookConfigError) as caught:
        load_apply_config(path)
    src = str(path)
    assert caught.value.problems == [
        f"{src}: extra: unknown key",
        f"{src}: state_dir: must be an absolute path, got 'relative'",
        f"{src}: opensm.bogus: unknown key",
        f"{src}: opensm.config_file: must be an absolute path",
        f"{src}: opensm.qos_policy_file: required",
        f"{src}: opensm.partitions_file: required",
        f"{src}: opensm.state_dir: required",
        f"{src}: opensm: one of pid_file or pid is required",
        f"{src}: slurm.slurm_conf: missing",
        f"{src}: slurm.persist: must be true or false, got 'maybe'",
        f"{src}: approval_config: {approval}: limits.max_pool_share_moved: "
        "must be a number from 0 to 1, got 3",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("state_dir: /x\n", "opensm, slurm: configure at least one of them"),
        ("- a list\n", "must be a mapping with keys state_dir, approval_config, opensm, slurm"),
        ("state_dir: /x\nslurm: [1]\n", "slurm: must be a mapping"),
        ("state_dir: [unclosed\n", "not valid YAML"),
    ],
)
def test_shapes(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "apply.yaml"
    path.write_text(text)
    with pytest.raises(HookConfigError) as caught:
        load_apply_config(path)
    assert any(p.startswith(f"{path}: ") and problem in p for p in caught.value.problems), (
        caught.value.problems
    )


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(HookConfigError, match="cannot read"):
        load_apply_config(tmp_path / "nope.yaml")


def test_unknown_keys_do_not_hide_value_errors_in_any_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One `ibpool apply` run lists every problem: unknown keys and the values beside them."""
    approval = tmp_path / "approval.yaml"
    approval.write_text("name: n\nauto_approve:\n  move_nodes: {max_nodes: -1, extra: 2}\n")
    path = tmp_path / "apply.yaml"
    path.write_text(
        f"state_dir: /srv/apply\nbogus: 1\napproval_config: {approval}\n"
        "slurm:\n  slurm_conf: relative/slurm.conf\n  poll_interval_seconds: -1\n  colour: red\n"
    )
    assert apply_main(["abc", "--config", str(path), "--db", str(tmp_path / "none.db")]) == 2
    src = str(path)
    assert capsys.readouterr().err.splitlines() == [
        f"ibpool apply: {src}: bogus: unknown key",
        f"ibpool apply: {src}: slurm.colour: unknown key",
        f"ibpool apply: {src}: slurm.slurm_conf: must be an absolute path, got 'relative/slurm.conf'",
        f"ibpool apply: {src}: slurm.poll_interval_seconds: must be a positive number of seconds, got -1",
        f"ibpool apply: {src}: approval_config: {approval}: auto_approve.move_nodes.extra: unknown key",
        f"ibpool apply: {src}: approval_config: {approval}: auto_approve.move_nodes.max_nodes: "
        "must be an integer >= 1, got -1",
    ]
