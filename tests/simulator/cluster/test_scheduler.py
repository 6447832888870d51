"""Scheduler: conservation, FIFO with backfill, drain and partition changes."""

from __future__ import annotations

import pytest

from simulator.cluster.errors import ControlError
from simulator.cluster.jobs import DONE, FAILED, PENDING, RUNNING
from simulator.cluster.model import ClusterModel
from simulator.cluster.scheduler import FREE
from simulator.cluster.spec import simple_spec
from simulator.cluster.workload import JobRequest, day_night_workload


def check_conservation(model: ClusterModel) -> None:
    """GPUs never over-allocated; every job in exactly one state, and where that state says."""
    sched = model.scheduler
    slot_owner: dict[int, int] = {}
    for i, node in enumerate(sched.nodes):
        assert node.used <= len(node.slots)
        for gpu, job_id in enumerate(node.slots):
            if job_id != FREE:
                slot_owner[job_id] = slot_owner.get(job_id, 0) + 1
                assert model.jobs[job_id].state == RUNNING
                assert (i, gpu) in model.jobs[job_id].gpu_slots
    queued = [j for pool in sched.pools.values() for j in pool.queue]
    assert len(queued) == len(set(queued))
    for job in model.jobs.values():
        assert job.state in (PENDING, RUNNING, DONE, FAILED)
        in_queue = job.id in sched.pools[job.pool].queue
        is_running = job.id in model.running
        assert in_queue == (job.state == PENDING)
        assert is_running == (job.state == RUNNING)
        assert slot_owner.get(job.id, 0) == (job.gpus if is_running else 0)
    view = model.scheduler_view()
    for pool in view.pools.values():
        assert 0 <= pool.allocated_gpus <= pool.capacity_gpus
    assert sum(p.running_gpus for p in view.pools.values()) == sum(n.used for n in sched.nodes)
    states = model.job_states()
    assert sum(states.values()) == len(model.jobs)


def test_conservation_under_a_busy_generated_workload() -> None:
    spec = simple_spec({"day": 12, "night": 12}, hosts_per_leaf=4, oversubscription=2.0)
    workload = day_night_workload("day", "night", 96, 96, seed=5, load=1.3)
    model = ClusterModel(spec, workload)
    for _ in range(6 * 24):  # one day in 10-minute steps
        model.advance(600)
        check_conservation(model)
    states = model.job_states()
    assert states[DONE] > 50 and states[PENDING] > 0  # busy enough to queue


def test_fifo_head_gets_a_reservation_and_small_jobs_backfill_around_it() -> None:
    model = ClusterModel(simple_spec({"p": 4}))
    long_jobs = [model.submit(JobRequest("p", 0, 8, 3600)) for _ in range(3)]
    head = model.submit(JobRequest("p", 0, 16, 600))  # needs 2 nodes: only 1 free
    short = model.submit(JobRequest("p", 0, 4, 600))  # fits on the free node, ends long before
    longer = model.submit(JobRequest("p", 0, 4, 7200))  # would run past the reservation on its node
    assert all(model.jobs[j].state == RUNNING for j in long_jobs)
    assert model.jobs[head].state == PENDING
    assert model.jobs[short].state == RUNNING  # backfilled
    assert model.jobs[longer].state == PENDING  # would delay the head
    model.advance(3600)
    assert model.jobs[head].state == RUNNING
    assert model.jobs[head].start_time == pytest.approx(3600.0)


def test_fifo_order_within_a_pool() -> None:
    model = ClusterModel(simple_spec({"p": 1}))
    ids = [model.submit(JobRequest("p", 0, 8, 600)) for _ in range(3)]
    model.advance(650)
    assert [model.jobs[i].state for i in ids] == [DONE, RUNNING, PENDING]


def test_moving_a_node_between_pools_never_kills_a_running_job() -> None:
    model = ClusterModel(simple_spec({"a": 2, "b": 2}))
    job = model.submit(JobRequest("a", 0, 8, 1800))
    on = model.spec.nodes[model.jobs[job].nodes[0]]
    model.drain(on, "move to b")
    assert model.scheduler_view().nodes[on].state == "draining"
    # Slurm accepts the new lists at once; the job keeps its node until it ends.
    members_a = [n for n in model.partition_nodes("a") if n != on]
    model.set_partition_nodes("a", members_a)
    model.set_partition_nodes("b", [*model.partition_nodes("b"), on])
    view = model.scheduler_view()
    assert model.jobs[job].state == RUNNING
    assert view.nodes[on].pools == ("b",)
    assert view.pools["a"].capacity_gpus == 8 and view.pools["b"].capacity_gpus == 24
    assert view.pools["a"].running_gpus == 8  # its job, now on a node of pool b
    model.advance(1800)
    assert model.jobs[job].state == DONE and model.jobs[job].end_time == pytest.approx(1800.0)
    assert model.scheduler_view().nodes[on].state == "drained"
    model.resume(on)
    b_jobs = [model.submit(JobRequest("b", 0, 8, 600)) for _ in range(3)]
    assert all(model.jobs[j].state == RUNNING for j in b_jobs)
    assert model.scheduler_view().pools["b"].allocated_gpus == 24


def test_drained_nodes_take_no_new_jobs_and_resume_brings_them_back() -> None:
    model = ClusterModel(simple_spec({"p": 2}))
    model.drain("node0001")
    model.drain("node0002")
    job = model.submit(JobRequest("p", 0, 1, 60))
    assert model.jobs[job].state == PENDING
    assert model.scheduler_view().pools["p"].available_gpus == 0
    model.resume("node0002")
    assert model.jobs[job].state == RUNNING
    assert model.spec.nodes[model.jobs[job].nodes[0]] == "node0002"


def test_partition_lists_accept_hostlists_and_refuse_unknown_names() -> None:
    model = ClusterModel(simple_spec({"a": 2, "b": 2}))
    model.set_partition_nodes("a", "node[0001-0003]")
    assert model.partition_nodes("a") == ["node0001", "node0002", "node0003"]
    with pytest.raises(ControlError, match="unknown nodes node0099"):
        model.set_partition_nodes("a", ["node0001", "node0099"])
    assert model.partition_nodes("a") == ["node0001", "node0002", "node0003"]
    view = model.scheduler_view()
    assert view.nodes["node0003"].pools == ("a", "b")  # overlapping partitions, as Slurm allows
