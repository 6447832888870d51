"""The adapter's config from its YAML form: typed, frozen, every error at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler_hooks.errors import HookConfigError
from scheduler_hooks.opensm.config import OpenSMConfig

YAML = """
config_file: /etc/opensm/opensm.conf
qos_policy_file: /etc/opensm/qos-policy.conf
partitions_file: /etc/opensm/partitions.conf
pid_file: /run/opensm.pid
state_dir: /var/lib/ibpool/opensm
nodes: {gpu001: [0x0002c90300a1b2c1, "0x0002c90300a1b2c2"]}
diag:
  preload: /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
  env: {IBSIM_SOCKNAME: sim1}
  ca: mlx5_0
  port: 1
verify: {ports: sample, sample_size: 4, timeout: 5}
"""


def test_full_config() -> None:
    config = OpenSMConfig.from_mapping(yaml.safe_load(YAML))
    assert config.pid_file == Path("/run/opensm.pid") and config.process_name == "opensm"
    assert config.nodes["gpu001"] == ("0x0002c90300a1b2c1", "0x0002c90300a1b2c2")  # YAML made one an int
    assert config.diag.env == {"IBSIM_SOCKNAME": "sim1"} and config.diag.ca == "mlx5_0"
    assert config.verify.ports == "sample" and config.verify.timeout == 5.0 and config.verify.path_pairs == 4
    with pytest.raises(AttributeError):
        config.pid = 3  # type: ignore[misc]


def test_every_error_at_once() -> None:
    data = {
        "config_file": "relative/opensm.conf",
        "pid": 0,
        "node_name_pattern": "no-group",
        "surprise": 1,
        "nodes": {"n1": ["zz"]},
        "diag": {"ca": "mlx5_0; rm -rf /", "concurrency": 99, "bogus": True},
        "verify": {"ports": "some", "timeout": -1},
    }
    with pytest.raises(HookConfigError) as caught:
        OpenSMConfig.from_mapping(data, source="hooks.yaml")
    assert caught.value.problems == [
        "hooks.yaml: opensm.surprise: unknown key",
        "hooks.yaml: opensm.config_file: must be an absolute path",
        "hooks.yaml: opensm.qos_policy_file: required",
        "hooks.yaml: opensm.partitions_file: required",
        "hooks.yaml: opensm.state_dir: required",
        "hooks.yaml: opensm.pid: an integer 1-4194304",
        "hooks.yaml: opensm: one of pid_file or pid is required",
        "hooks.yaml: opensm.node_name_pattern: needs one capture group",
        "hooks.yaml: opensm.diag.bogus: unknown key",
        "hooks.yaml: opensm.diag.ca: a device name like mlx5_0",
        "hooks.yaml: opensm.diag.concurrency: an integer 1-8",
        "hooks.yaml: opensm.verify.ports: all or sample",
        "hooks.yaml: opensm.verify.timeout: a positive number",
        "hooks.yaml: opensm.nodes.n1: not port GUIDs: ['zz']",
    ]
