"""The model behind a real Slurm: a cluster laid out from the model, and a partition move or drain made
with `scontrol` (what the hooks do) changes the model's pools and what it schedules next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.backends.slurm_mirror import SlurmMirror, slurm_layout
from simulator.cluster.jobs import PENDING, RUNNING
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty
from simulator.cluster.spec import simple_spec
from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason

SKIP = slurm_skip_reason()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]


@pytest.fixture
def model() -> ClusterModel:
    return ClusterModel(simple_spec({"train": 4, "infer": 4}, hosts_per_leaf=4))


@pytest.fixture
def slurm(tmp_path: Path, model: ClusterModel) -> Iterator[SlurmCluster]:
    layout = slurm_layout(model)
    cluster = SlurmCluster(
        tmp_path / "slurm",
        node_names=layout.nodes,
        partitions=layout.partitions,
        gpus_per_node=layout.gpus_per_node,
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_partition_move_in_slurm_changes_the_models_pools(model: ClusterModel, slurm: SlurmCluster) -> None:
    mirror = SlurmMirror(model, slurm.env)
    assert slurm.partition_members()["train"] == ["node0001", "node0002", "node0003", "node0004"]
    assert not mirror.sync().changed  # the cluster was laid out from the model
    big = model.submit(chatty("train", gpus=40))  # five nodes: more than train has
    assert model.jobs[big].state == PENDING

    # The hooks' rebalancing: drain, move the node, read back, resume.
    slurm.set_node_state(["node0005"], "DRAIN", "moving to train")
    slurm.scontrol("update", "PartitionName=train", "Nodes=node[0001-0005]")
    slurm.scontrol("update", "PartitionName=infer", "Nodes=node[0006-0008]")
    result = mirror.sync()
    assert set(result.moved) == {"train", "infer"} and result.drained == ("node0005",)
    pools = model.scheduler_view().pools
    assert pools["train"].capacity_gpus == 40 and pools["infer"].capacity_gpus == 24
    assert model.scheduler_view().nodes["node0005"].reason == "moving to train"
    assert model.jobs[big].state == PENDING  # node0005 is drained: nothing new starts there

    slurm.set_node_state(["node0005"], "RESUME")
    assert mirror.sync().resumed == ("node0005",)
    model.advance(10)
    assert model.jobs[big].state == RUNNING and "node0005" in model.scheduler_view().pools["train"].nodes
    assert not mirror.sync().changed
