"""The rendered ibsim topology: the model's switches, HCAs, ports, cables, GUIDs and link speed."""

from __future__ import annotations

import dataclasses

import pytest

from simulator.backends.ibsim_net import first_hca, link_speed, render_net
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import shared_uplink_spec
from simulator.cluster.spec import simple_spec
from simulator.cluster.topology import Topology


def test_shared_uplink_fabric_renders_every_node_and_cable_end() -> None:
    topo = ClusterModel(shared_uplink_spec()).topology
    lines = render_net(topo).splitlines()
    assert lines[3:8] == [
        "switchguid=0x0002c90300200000",
        'Switch 2 "spine01"',
        '[1] "leaf001"[5]  # lid 0 4xHDR',
        '[2] "leaf002"[5]  # lid 0 4xHDR',
        "",
    ]
    assert 'Switch 5 "leaf001"' in lines and '[5] "spine01"[1]  # lid 0 4xHDR' in lines
    hca = lines.index('Hca 1 "node0008 mlx5_0"')
    assert lines[hca - 1] == "caguid=0xb83fd20300000700"
    assert lines[hca + 1] == '[1] "leaf002"[4]  # lid 0 4xHDR'
    cable_ends = [line for line in lines if line.startswith("[")]
    assert len(cable_ends) == 2 * len(topo.links)
    assert first_hca(topo) == "node0001 mlx5_0"


def test_uncabled_ports_are_left_out_and_rails_are_separate_hcas() -> None:
    topo = Topology(simple_spec({"a": 3}, hosts_per_leaf=4, ports_per_node=2))
    text = render_net(topo)
    assert 'Switch 8 "leaf001"' in text and '[4] "' not in text  # one leaf per rail, host port 4 unused
    assert 'Hca 1 "node0003 mlx5_1"\n[1] "leaf002"[3]' in text


@pytest.mark.parametrize(
    ("gbps", "speed"), [(400, "4xHDR"), (200, "4xHDR"), (100, "4xEDR"), (56, None), (10, None)]
)
def test_speeds_ibsim_parses(gbps: float, speed: str | None) -> None:
    assert link_speed(gbps * 1e9 / 8) == speed


def test_slow_links_get_ibsims_default() -> None:
    spec = shared_uplink_spec()
    slow = dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric, link_bytes_per_second=5e9))
    text = render_net(Topology(slow))
    assert "# lid" not in text and "ibsim default" in text


def test_names_ibsim_cannot_take_are_refused() -> None:
    spec = simple_spec({"a": 1})
    bad = dataclasses.replace(spec, nodes=('no"de',), pools=())
    with pytest.raises(ValueError, match="cannot be an ibsim node name"):
        render_net(Topology(bad))
