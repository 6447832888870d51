"""Validation reports every problem at once and needs no fabric for table changes."""

from __future__ import annotations

from pathlib import Path

from scheduler_hooks.opensm.config import OpenSMConfig
from scheduler_hooks.opensm.model import Change
from scheduler_hooks.opensm.render import Texts
from scheduler_hooks.opensm.validate import Context, validate
from tests.scheduler_hooks.opensm.test_files_render import CONF, NAMES, PARTITIONS, POLICY

CONFIG = OpenSMConfig(
    config_file=Path("/etc/opensm/opensm.conf"),
    qos_policy_file=Path("/etc/opensm/qos-policy.conf"),
    partitions_file=Path("/etc/opensm/partitions.conf"),
    state_dir=Path("/var/lib/ibpool/opensm"),
    pid=1,
)


def context(config: str = CONF, policy: str | None = POLICY, partitions: str | None = PARTITIONS) -> Context:
    return Context(
        CONFIG, Texts(config, policy, partitions), None, NAMES, {"node3/P1": NAMES["node3"][0]}, None
    )


def problems(changes: list[Change], ctx: Context | None = None) -> list[str]:
    return [str(p) for p in validate(changes, ctx or context())]


def test_good_changes_pass() -> None:
    changes = [
        Change("opensm.vlarb_low", "1:64", "0:0,1:100,2:50"),
        Change("opensm.vlarb_high", None, "0:4"),
        Change("opensm.sl2vl", None, "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7"),
        Change("opensm.port_group.training.sl", "4", "5"),
        Change("opensm.port_group.training.members", None, "node1,node4"),
        Change("opensm.partition.training.members", None, "node1,node3=limited,0x0000000000100004=both"),
    ]
    assert problems(changes) == []


def test_every_problem_at_once() -> None:
    changes = [
        Change("opensm.vlarb_low", None, "1:64,1:2,9:1"),
        Change("opensm.vlarb_low", None, "1:1"),
        Change("opensm.nonsense", None, "1"),
        Change("opensm.sl2vl", None, "0,1"),
        Change("opensm.port_group.nosuch.sl", None, "3"),
        Change("opensm.port_group.storage.members", None, "node1"),
        Change("opensm.partition.mcast.members", None, "node1"),
        Change("opensm.partition.training.members", None, "node9,0x77"),
    ]
    assert problems(changes) == [
        "opensm.vlarb_low: entry 2: VL 1 appears twice",
        "opensm.vlarb_low: entry 3: VL 9 is not below qos_max_vls 8",
        "opensm.vlarb_low: appears more than once in the change set",
        "opensm.nonsense: unknown OpenSM target",
        "opensm.sl2vl: 2 entries, need 16 (one VL per SL)",
        "opensm.port_group.nosuch.sl: no port-group named 'nosuch' in the QoS policy file",
        "opensm.port_group.storage.members: port-group 'storage' also selects ports by node-type",
        "opensm.partition.mcast.members: partition 'mcast' lists members other than port GUIDs",
        "opensm.partition.training.members: node 'node9' is not known (no CA port with that name)",
        "opensm.partition.training.members: port GUID 0x0000000000000077 is not a CA port on the fabric",
    ]


def test_environment_problems() -> None:
    off = CONF.replace("qos TRUE", "qos FALSE") + "qos_policy_file /etc/other.conf\n"
    changes = [Change("opensm.vlarb_low", None, "1:1"), Change("opensm.port_group.training.sl", None, "1")]
    assert problems(changes, context(config=off)) == [
        "opensm.vlarb_low: QoS is off in opensm.conf (qos TRUE is needed)",
        "opensm.port_group.training.sl: QoS is off in opensm.conf (qos TRUE is needed)",
        "opensm.port_group.training.sl: opensm.conf reads the QoS policy from /etc/other.conf",
    ]
    no_default = POLICY.replace("name: DEFAULT", "name: other")
    assert problems([changes[1]], context(policy=no_default)) == [
        "opensm.port_group.training.sl: the QoS policy has no DEFAULT qos-level"
        " (OpenSM rejects such a policy)"
    ]
    assert problems(
        [Change("opensm.partition.training.members", None, "node1")], context(partitions=None)
    ) == ["opensm.partition.training.members: the partitions file does not exist"]
    unreadable = Context(CONFIG, None, "cannot read the OpenSM files: denied", NAMES, {}, None)
    assert problems([changes[0]], unreadable) == ["opensm: cannot read the OpenSM files: denied"]
    no_pkey = PARTITIONS.replace("training=0x0002", "training")
    assert problems(
        [Change("opensm.partition.training.members", None, "node1")], context(partitions=no_pkey)
    ) == [
        "opensm.partition.training.members: partition 'training' has no explicit pkey (needed to verify it)"
    ]
    no_fabric = Context(CONFIG, Texts(CONF, POLICY, PARTITIONS), None, {}, {}, "ibnetdiscover: exit 1")
    assert problems([Change("opensm.partition.training.members", None, "node1")], no_fabric) == [
        "opensm.partition.training.members: node names cannot be resolved: ibnetdiscover: exit 1"
    ]
