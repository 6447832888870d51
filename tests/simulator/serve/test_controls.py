"""Control and fault requests in the real systems' forms; a refused request changes nothing."""

from __future__ import annotations

import pytest

from simulator.cluster.errors import ControlError, FaultError
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import shared_uplink_spec
from simulator.serve import controls
from simulator.serve.errors import RequestError


@pytest.fixture
def model() -> ClusterModel:
    return ClusterModel(shared_uplink_spec())


def test_request_params_take_query_then_scontrol_words() -> None:
    params = controls.request_params(
        {"pool": ["a"], "Limit": ["1", "2"]}, b'scontrol update PartitionName=hi Reason="two words"'
    )
    assert params == {"pool": "a", "limit": "2", "partitionname": "hi", "reason": "two words"}
    with pytest.raises(RequestError, match="cannot parse"):
        controls.request_params({}, b'Reason="unclosed')


def test_vl_weights_from_opensm_conf_lines(model: ClusterModel) -> None:
    body = b"# from opensm.conf\nqos_vlarb_high 0:4,1:0\nqos_vlarb_low 0:0,1:64\n"
    assert controls.set_vl_weights(model, body, {}) == "effective VL weights 0:4,1:64,2:0,3:0,4:0,5:0,6:0,7:0"
    controls.set_vl_weights(model, b"", {"low": ["0:32,1:224"]})
    assert model.qos().vlarb_high == ((0, 4), (1, 0))  # a table not given is kept
    assert model.vl_weights()[:2] == (36, 224)
    controls.set_vl_weights(model, b"qos_sl2vl 1,0,2,3,4,5,6,7\n", {})
    assert model.vl_of_pool("lo") == 1


def test_bad_weights_are_refused_and_change_nothing(model: ClusterModel) -> None:
    before = model.qos()
    with pytest.raises(RequestError, match="qos_ca_vlarb_low"):
        controls.set_vl_weights(model, b"qos_ca_vlarb_low 0:1\nqos_vlarb_low 0:2\n", {})
    with pytest.raises(ControlError, match="weight 300"):
        controls.set_vl_weights(model, b"qos_vlarb_low 0:300\n", {})
    with pytest.raises(RequestError, match="nothing to set"):
        controls.set_vl_weights(model, b"\n", {})
    assert model.qos() == before


def test_partition_drain_and_resume_as_scontrol_takes_them(model: ClusterModel) -> None:
    assert controls.set_partition(model, {"partitionname": "hi", "nodes": "node[0001-0003]"}) == (
        "partition hi: 3 nodes"
    )
    assert model.partition_nodes("hi") == ["node0001", "node0002", "node0003"]
    assert controls.drain(model, {"nodename": "node[0002-0003]", "reason": "move"}) == "drained 2 nodes"
    assert model.scheduler_view().nodes["node0002"].reason == "move"
    assert controls.resume(model, {"node": "node0002", "state": "resume"}) == "resumed 1 nodes"
    assert model.scheduler_view().nodes["node0002"].state == "idle"


@pytest.mark.parametrize(
    ("action", "params", "message"),
    [
        (controls.set_partition, {"nodes": "node0001"}, "PartitionName"),
        (controls.set_partition, {"partitionname": "hi", "nodes": "node9999"}, "unknown nodes"),
        (controls.set_partition, {"partitionname": "hi", "nodes": "x", "bogus": "1"}, "unknown keys: bogus"),
        (controls.drain, {"nodename": "node0001", "state": "RESUME"}, "does not belong"),
        (controls.drain, {}, "NodeName"),
        (controls.resume, {"nodename": "node[0001-0002],nodeX"}, "unknown nodes: nodeX"),
    ],
)
def test_bad_scheduler_requests_change_nothing(
    model: ClusterModel, action: controls.ModelAction, params: dict[str, str], message: str
) -> None:
    before = model.scheduler_view()
    with pytest.raises((RequestError, ControlError), match=message):
        action(model, params)
    assert model.scheduler_view() == before


def test_faults_by_node_and_rail_or_by_port_name(model: ClusterModel) -> None:
    assert controls.model_fault(model, "xid", {"node": "node0001", "gpu": "3", "xid": "48"}) == (
        "xid 48 on node0001/gpu3"
    )
    assert model.gpu_events["node0001"][-1].value == 48
    assert controls.model_fault(model, "link_down", {"node": "node0002"}).startswith(
        "link_down node0002 mlx5_0/1"
    )
    assert not model.fabric.port_up(model.hca_port("node0002"))
    controls.model_fault(model, "link_up", {"port": "leaf001/2"})
    assert model.fabric.port_up(model.hca_port("node0002"))
    controls.model_fault(model, "symbol_errors", {"port": "leaf001/5", "count": "7"})
    assert (
        model.fabric_view().ports[controls.port_index(model, {"port": "leaf001/5"})].counters["symbol_error"]
        == 7
    )
    controls.model_fault(model, "saturate", {"node": "node0001"})
    assert model.node_counters("node0001")[0].xmit_wait == (1 << 32) - 1
    controls.model_fault(model, "lose_gpu", {"node": "node0005", "gpu": "1"})
    assert model.scheduler_view().nodes["node0005"].state in ("drained", "draining")


@pytest.mark.parametrize(
    ("kind", "params", "error", "message"),
    [
        ("melt", {}, RequestError, "unknown fault kind"),
        ("xid", {"node": "node0001", "gpu": "x"}, RequestError, "not an integer"),
        ("xid", {"node": "nobody"}, FaultError, "unknown node"),
        ("lose_gpu", {"node": "node0001"}, RequestError, "gpu is required"),
        ("flap", {"port": "leaf001/9"}, RequestError, "unknown port"),
        ("flap", {}, RequestError, "give node"),
        ("saturate", {"node": "node0001", "counter": "port_xmit_data"}, FaultError, "64-bit"),
    ],
)
def test_bad_faults_are_refused(
    model: ClusterModel, kind: str, params: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        controls.model_fault(model, kind, params)
    assert model.events == []
