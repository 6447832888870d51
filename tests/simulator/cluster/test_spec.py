"""The spec: from a dict or YAML, every problem reported at once; argument formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.cluster.errors import ControlError, SpecError
from simulator.cluster.hostlist import expand_hostlist, parse_vlarb
from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import load_spec, spec_from_dict

YAML = """
seed: 7
nodes: 24
tick_seconds: 30
fabric: {hosts_per_leaf: 8, oversubscription: 2.0, spines: 2}
priority_classes: {normal: 0, high: 1}
qos: {vlarb_high: [], vlarb_low: [[0, 32], [1, 96]], sl2vl: [0, 1]}
pools:
  - {name: recsys, nodes: 16, priority_class: high}
  - {name: llm, nodes: [node0017, node0018, node0019, node0020, node0021, node0022, node0023, node0024]}
"""


def test_a_yaml_spec_builds_a_model(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(YAML)
    spec = load_spec(path)
    assert spec.seed == 7 and spec.tick_seconds == 30
    assert spec.pool("recsys").nodes[-1] == "node0016"
    assert spec.fabric.uplinks_per_leaf == 4 and spec.fabric.spine_count == 2
    model = ClusterModel(spec)
    assert model.topology.leaves == 3
    assert model.vl_of_pool("recsys") == 1 and model.vl_of_pool("llm") == 0
    assert model.vl_weights()[:2] == (32, 96)
    assert model.scheduler_view().pools["llm"].capacity_gpus == 64


def test_every_problem_is_reported_at_once_with_its_key() -> None:
    with pytest.raises(SpecError) as info:
        spec_from_dict(
            {
                "nodes": 4,
                "colour": "blue",
                "fabric": {"hosts_per_leaf": 0},
                "qos": {"vlarb_low": [[9, 300]]},
                "pools": [{"name": "a", "nodes": 8, "priority_class": "vip"}],
            },
            "cluster.yaml",
        )
    message = str(info.value)
    for expected in (
        "cluster.yaml",
        "colour: unknown key",
        "pools[0].nodes: 8 asked",
        "fabric.hosts_per_leaf",
        "VL 9",
        "weight 300",
        "unknown class 'vip'",
    ):
        assert expected in message


def test_hostlists_and_vlarb_strings() -> None:
    assert expand_hostlist("node[0001-0003,0007],spare1") == [
        "node0001",
        "node0002",
        "node0003",
        "node0007",
        "spare1",
    ]
    assert parse_vlarb("0:4,1:0x40") == [(0, 4), (1, 64)]
    with pytest.raises(ControlError):
        expand_hostlist("node[1-")
    with pytest.raises(ControlError):
        parse_vlarb("0=4")


def test_yaml_numbers_as_strings_are_read_and_garbage_is_a_clear_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yml"
    spec.write_text("nodes: 4\npools: [{name: a, nodes: 4}]\nfabric: {link_bytes_per_second: 5.0e10}\n")
    assert load_spec(spec).fabric.link_bytes_per_second == 5.0e10  # YAML 1.1 reads 5.0e10 as a string
    spec.write_text(
        "nodes: 4\npools: [{name: a, nodes: 4}]\nfabric: {hosts_per_leaf: lots}\ntick_seconds: x\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert "fabric.hosts_per_leaf: 'lots' is not a int" in str(caught.value)
    assert "tick_seconds: 'x' is not a float" in str(caught.value)
