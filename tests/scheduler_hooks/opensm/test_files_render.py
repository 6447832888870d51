"""Reading and rewriting opensm.conf, the QoS policy file and partitions.conf, the rest kept as is."""

from __future__ import annotations

import pytest

from scheduler_hooks.opensm import conffile, partitions, policy
from scheduler_hooks.opensm.render import Texts, file_value, render
from scheduler_hooks.opensm.targets import Kind, Target

CONF = """# OpenSM config
qos TRUE
qos_max_vls 8
qos_vlarb_high 0:4,1:0
#qos_vlarb_low 0:0,1:1
qos_vlarb_low 0:0,1:64
qos_ca_vlarb_low 0:0,1:32
qos_swe_vlarb_low (null)
qos_sw0_sl2vl (null)
log_file /var/log/opensm.log
"""
G = {n: f"0x{0x100000 + i:016x}" for i, n in enumerate(["node1", "node2", "node3", "node4"], 1)}
NAMES = {n: (g,) for n, g in G.items()}
POLICY = f"""# site policy
port-groups
    port-group
        name: training
        use: the training pool
        port-guid: {G["node1"]},
                   {G["node2"]}
    end-port-group
    port-group
        name: inference
        port-name: node3/P1
    end-port-group
    port-group
        name: storage
        node-type: CA
    end-port-group
end-port-groups

qos-levels
    qos-level
        name: DEFAULT
        sl: 0
    end-qos-level
    qos-level
        name: shared
        sl: 4
    end-qos-level
end-qos-levels

qos-match-rules
    qos-match-rule
        qos-class: 7
        qos-level-name: shared
    end-qos-match-rule
    qos-match-rule
        source: training, inference
        qos-level-name: shared
    end-qos-match-rule
end-qos-match-rules
"""
PARTITIONS = f"""# site partitions
Default=0x7fff, ipoib : ALL=full ;
training=0x0002 : {G["node1"]}=full, {G["node2"]} ; # a comment; with a semicolon
inference=0x0003, defmember=full :
    {G["node3"]},
    {G["node4"]}=limited ;
mcast=0x0004 : mgid=ff12:401b::1, {G["node1"]} ;
"""


def test_conffile_options_and_managed_keys() -> None:
    options = conffile.parse_options(CONF)
    assert options["qos_vlarb_low"] == "0:0,1:64" and conffile.max_vls(options) == 8
    assert conffile.managed_keys(Kind.VLARB_LOW, options) == ["qos_vlarb_low", "qos_ca_vlarb_low"]
    assert conffile.managed_keys(Kind.SL2VL, options) == ["qos_sl2vl"]  # (null) variants stay unset
    assert conffile.max_vls({}) == 15


def test_conffile_rewrites_in_place_and_appends_missing_keys() -> None:
    out = conffile.set_options(CONF, {"qos_vlarb_low": "1:9", "qos_ca_vlarb_low": "1:9", "qos_sl2vl": "0"})
    lines = out.splitlines()
    assert lines[4] == "#qos_vlarb_low 0:0,1:1" and lines[5] == "qos_vlarb_low 1:9"
    assert lines[6] == "qos_ca_vlarb_low 1:9" and lines[7] == "qos_swe_vlarb_low (null)"
    assert lines[-2:] == ["# set by ibpool", "qos_sl2vl 0"]


def test_render_vlarb_sets_the_generic_key_and_present_variants() -> None:
    texts = Texts(CONF, POLICY, PARTITIONS)
    out = render([(Target(Kind.VLARB_LOW), "1:100,2:50")], texts, NAMES)
    options = conffile.parse_options(out.config)
    assert options["qos_vlarb_low"] == options["qos_ca_vlarb_low"] == "1:100,2:50"
    assert out.policy == POLICY and out.partitions == PARTITIONS
    assert file_value(Target(Kind.VLARB_LOW), out, NAMES, {}) == "1:100,2:50"
    assert file_value(Target(Kind.SL2VL), out, NAMES, {}) is None


def test_policy_reading_and_effective_sl() -> None:
    doc = policy.parse_policy(POLICY)
    training = doc.port_group("training")
    assert training is not None and training.values("port-guid") == [G["node1"], G["node2"]]
    assert doc.group_sl("training") == 4  # the qos-class rule does not match a plain path query
    assert doc.group_sl("storage") == 0  # no rule: DEFAULT
    assert not doc.owned_by("shared", "training")
    names = {"node3/P1": G["node3"]}
    texts = Texts(CONF, POLICY, PARTITIONS)
    assert file_value(Target(Kind.GROUP_MEMBERS, "inference"), texts, NAMES, names) == "node3"
    assert file_value(Target(Kind.GROUP_SL, "inference"), texts, NAMES, names) == "4"


def test_group_sl_adds_a_level_and_a_first_rule_when_the_level_is_shared() -> None:
    out = policy.set_group_sl(POLICY, "training", 6)
    doc = policy.parse_policy(out)
    assert doc.group_sl("training") == 6 and doc.group_sl("inference") == 4  # inference untouched
    rules = doc.of("qos-match-rule")
    assert rules[0].values("source") == ["training"] and rules[0].get("qos-level-name") == "ibpool-training"
    assert out.startswith("# site policy\n") and "        name: ibpool-training\n            sl: 6" not in out
    # A second change edits ibpool's own level in place.
    again = policy.set_group_sl(out, "training", 2)
    assert policy.parse_policy(again).group_sl("training") == 2
    lines = [line.strip() for line in again.splitlines()]
    assert lines.count("name: ibpool-training") == 1 and lines.count("qos-match-rule") == 3


def test_group_sl_creates_missing_sections() -> None:
    bare = "port-groups\n  port-group\n    name: p\n    port-guid: 0x1\n  end-port-group\nend-port-groups\n"
    out = policy.set_group_sl(bare, "p", 3)
    doc = policy.parse_policy(out)
    assert doc.group_sl("p") == 3 and doc.default_sl() is None  # validation reports the missing DEFAULT


def test_group_members_rewrites_guid_and_name_entries() -> None:
    out = policy.set_group_members(POLICY, "training", [G["node3"], G["node4"]])
    group = policy.parse_policy(out).port_group("training")
    assert group is not None and group.values("port-guid") == [G["node3"], G["node4"]]
    assert group.get("use") == "the training pool"
    out = policy.set_group_members(POLICY, "inference", [])
    group = policy.parse_policy(out).port_group("inference")
    assert group is not None and group.entries[0].key == "name" and len(group.entries) == 1
    with pytest.raises(policy.PolicyError, match="node-type"):
        policy.set_group_members(POLICY, "storage", [G["node1"]])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("port-groups\n  port-group\n    name: x\n", "never closed"),
        ("end-port-groups\n", "without port-groups"),
        ("port-groups\n  port-group\n  port-group\n", "inside port-group"),
        ("qos-levels\n  sl 3\nend-qos-levels\n", "cannot read 'sl 3'"),
    ],
)
def test_policy_errors(text: str, message: str) -> None:
    with pytest.raises(policy.PolicyError, match=message):
        policy.parse_policy(text)


def test_partitions_reading() -> None:
    statements = partitions.parse_partitions(PARTITIONS)
    assert [s.name for s in statements] == ["Default", "training", "inference", "mcast"]
    training, inference, mcast = statements[1:]
    assert training.pkey == 2 and partitions.port_memberships(training) == {
        G["node1"]: "full",
        G["node2"]: "limited",  # no membership: limited
    }
    assert partitions.port_memberships(inference) == {G["node3"]: "full", G["node4"]: "limited"}
    assert mcast.members is None and partitions.keywords(statements[0]) == ["ALL=full"]
    texts = Texts(CONF, POLICY, PARTITIONS)
    value = file_value(Target(Kind.PARTITION_MEMBERS, "training"), texts, NAMES, {})
    assert value == "node1,node2=limited"


def test_partition_members_rewrite_keeps_everything_else() -> None:
    out = partitions.set_members(PARTITIONS, "training", {G["node3"]: "full", G["node1"]: "both"})
    assert out.startswith("# site partitions\nDefault=0x7fff, ipoib : ALL=full ;\ntraining=0x0002 :\n")
    # The ';' ends the last member's line (alone on a line, OpenSM drops every partition).
    assert f"    {G['node1']}=both,\n    {G['node3']}=full ; # a comment; with a semicolon\n" in out
    assert out.endswith(f"mcast=0x0004 : mgid=ff12:401b::1, {G['node1']} ;\n")
    assert partitions.set_members(PARTITIONS, "training", {}).count("training=0x0002 : ;") == 1
    for name, message in (
        ("mcast", "not port GUIDs only"),
        ("Default", "not port GUIDs only"),
        ("x", "no partition"),
    ):
        with pytest.raises(partitions.PartitionError, match=message):
            partitions.set_members(PARTITIONS, name, {})
    with pytest.raises(partitions.PartitionError, match="after the last"):
        partitions.parse_partitions("a=0x1 : ALL ; b=0x2 : ALL")
