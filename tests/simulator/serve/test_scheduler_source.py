"""The scheduler exporter's real pool rules and collectors over the model say what scheduler_view says."""

from __future__ import annotations

import pytest

from exporter.scheduler.collector import SchedulerCollector, SchedulerStatusCollector
from exporter.scheduler.errors import NoFreshDataError
from exporter.scheduler.poller import SchedulerPoller
from foundation.exposition import render
from simulator.cluster.model import ClusterModel
from simulator.cluster.views import SchedulerView
from simulator.serve.presets import generated_workload, preset_spec
from simulator.serve.scheduler_source import SimulatedSlurm, cluster_state
from tests.helpers import Samples, samples_of
from tests.simulator.serve.helpers import PROMTOOL, promtool_problems, value

FAMILIES = (
    "ibpool_pool_node_info",
    "ibpool_pool_capacity_gpus",
    "ibpool_pool_allocated_gpus",
    "ibpool_pool_pending_gpus",
    "ibpool_pool_pending_jobs",
    "ibpool_pool_running_jobs",
    "ibpool_node_state_info",
)


def _busy_model(hours: float = 14.0) -> ClusterModel:
    """The small preset in the afternoon of its first day: both pools running, recsys queueing."""
    spec = preset_spec("small", seed=3)
    model = ClusterModel(spec, generated_workload(spec))
    model.advance(hours * 3600)
    return model


def _expected(view: SchedulerView) -> dict[str, Samples]:
    """The samples each family must have, from the view alone (allocated = the pool's own jobs' GPUs)."""
    out: dict[str, Samples] = {name: {} for name in FAMILIES}
    for pool in view.pools.values():
        key = (("pool", pool.name),)
        for node in pool.nodes:
            out["ibpool_pool_node_info"][(("node", node), ("pool", pool.name))] = 1
        out["ibpool_pool_capacity_gpus"][key] = pool.capacity_gpus
        out["ibpool_pool_allocated_gpus"][key] = pool.running_gpus
        out["ibpool_pool_pending_gpus"][key] = pool.pending_gpus
        out["ibpool_pool_pending_jobs"][key] = pool.pending_jobs
        out["ibpool_pool_running_jobs"][key] = pool.running_jobs
    for name, node_view in view.nodes.items():
        out["ibpool_node_state_info"][(("node", name), ("state", node_view.state))] = 1
    return out


class Exporter:
    """The real poller and collectors over a SimulatedSlurm of `model`."""

    def __init__(self, model: ClusterModel) -> None:
        self.slurm = SimulatedSlurm(lambda: cluster_state(model))
        self.poller = SchedulerPoller(self.slurm.read, 3600.0)
        self.collector = SchedulerCollector(self.poller, 3600.0)
        self.status = SchedulerStatusCollector(self.poller, 3600.0)

    def scrape(self) -> str:
        self.poller.poll_once()
        return render(self.collector.collect() + self.status.collect())


def _assert_matches(text: str, view: SchedulerView) -> None:
    expected = _expected(view)
    for name in FAMILIES:
        assert samples_of(text, name) == expected[name], name


def test_families_match_the_scheduler_view_exactly() -> None:
    model = _busy_model()
    view = model.scheduler_view()
    assert all(p.running_jobs and p.allocated_gpus == p.running_gpus for p in view.pools.values())
    assert view.pools["recsys"].pending_jobs > 0
    text = Exporter(model).scrape()
    _assert_matches(text, view)
    assert value(text, "ibpool_scheduler_up") == 1


def test_families_follow_a_partition_move_and_a_drain() -> None:
    model = _busy_model()
    exporter = Exporter(model)
    exporter.scrape()
    model.drain("node0016", "moving to llm")
    model.set_partition_nodes("recsys", "node[0001-0015]")
    model.set_partition_nodes("llm", "node[0016-0032]")
    model.advance(600)
    view = model.scheduler_view()
    assert "node0016" in view.pools["llm"].nodes and "node0016" not in view.pools["recsys"].nodes
    text = exporter.scrape()
    _assert_matches(text, view)
    assert value(text, "ibpool_pool_capacity_gpus", pool="llm") == 17 * 8
    states = {dict(k)["node"]: dict(k)["state"] for k in samples_of(text, "ibpool_node_state_info")}
    assert states["node0016"] in ("draining", "drained")


def test_job_records_are_what_squeue_would_list() -> None:
    model = _busy_model()
    state = cluster_state(model)
    running = [j for j in state.jobs if j.state == "RUNNING"]
    pending = [j for j in state.jobs if j.state == "PENDING"]
    assert len(running) == len(model.running) and all(j.active for j in running)
    assert all(len(j.nodes) == j.node_count and j.gpus > 0 for j in running)
    assert all(not j.nodes and j.gpus > 0 for j in pending)
    assert state.partitions == ("recsys", "llm")
    assert {n.gres_gpus for n in state.nodes} == {8}


def test_an_unreachable_slurmctld_stops_the_pool_series() -> None:
    model = _busy_model(hours=1.0)
    exporter = Exporter(model)
    exporter.scrape()
    exporter.slurm.available = False
    exporter.poller.poll_once()
    with pytest.raises(NoFreshDataError, match="slurm controller"):
        exporter.collector.collect()
    assert value(render(exporter.status.collect()), "ibpool_scheduler_up") == 0
    exporter.slurm.available = True
    assert value(exporter.scrape(), "ibpool_scheduler_up") == 1


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")
def test_promtool_accepts_the_exposition() -> None:
    assert promtool_problems(Exporter(_busy_model(hours=2.0)).scrape()) == []
