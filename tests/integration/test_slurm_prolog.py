"""The shipped Slurm prolog and epilog (deploy/slurm) in a real Slurm cluster, read by the real exporter.

Two nodes with four fake GPUs each, the prolog and epilog installed as docs/deploy.md says
(`SlurmCluster(job_mapping=True)`), and one simulated node exporter per node (`ibpool exporter
--simulate`, the real GPU and jobs collectors) reading that node's directory. A job started with
`--gres=gpu:N` must show in `ibpool_gpu_job_info` with its id and partition on the GPUs Slurm gave it, on
its node only, and vanish when it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.processes import free_port, http_get, ibpool_argv, start_http_program, stop
from tests.integration.slurm_cluster import SlurmCluster, slurm_skip_reason, wait_until

SKIP_REASON = slurm_skip_reason()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")]

GPUS = 4
PARTITIONS = {"training": ["node1"], "inference": ["node2"]}
Info = set[tuple[str, str, str]]  # (gpu, job, pool)


def job_info(port: int) -> tuple[Info, set[str]]:
    """(gpu, job, pool) of every ibpool_gpu_job_info sample, and the uuids they carry."""
    status, body = http_get(port, "/metrics")
    assert status == 200
    info: Info = set()
    uuids: set[str] = set()
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name == "ibpool_gpu_job_info":
                info.add((s.labels["gpu"], s.labels["job"], s.labels["pool"]))
                uuids.add(s.labels["uuid"])
    return info, uuids


def wait_for_info(port: int, expected: Info) -> set[str]:
    wait_until(lambda: job_info(port)[0] == expected, 30.0, f"ibpool_gpu_job_info == {expected}", 0.2)
    return job_info(port)[1]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SlurmCluster, dict[str, int]]]:
    with ExitStack() as stack:
        slurm = stack.enter_context(
            SlurmCluster(tmp_path, nodes=2, partitions=PARTITIONS, gpus_per_node=GPUS, job_mapping=True)
        )
        ports = {}
        for node in slurm.node_names:
            port = ports[node] = free_port()
            argv = ibpool_argv(
                "exporter", "--simulate", "--simulate.gpus", str(GPUS), "--simulate.ports", "1",
                "--jobs.directory", str(slurm.job_map_directory(node)),
                "--web.listen-address", f"127.0.0.1:{port}",
            )  # fmt: skip
            stack.callback(stop, start_http_program(argv, port))
        yield slurm, ports


def test_a_gpu_job_appears_through_the_prolog_and_goes_through_the_epilog(
    cluster: tuple[SlurmCluster, dict[str, int]],
) -> None:
    slurm, ports = cluster
    assert job_info(ports["node1"])[0] == set() and job_info(ports["node2"])[0] == set()

    first = slurm.submit("training", gpus_per_node=2)
    slurm.wait_job_state(first, "RUNNING")
    uuids = wait_for_info(ports["node1"], {("0", str(first), "training"), ("1", str(first), "training")})
    assert all(u.startswith("GPU-") for u in uuids), "the GPU collector's UUIDs fill the mapping in"

    # a second job gets the next GPUs of the same node; an inference job lands on node2 only
    second = slurm.submit("training", gpus_per_node=1)
    third = slurm.submit("inference", gpus_per_node=3)
    slurm.wait_job_state(second, "RUNNING")
    slurm.wait_job_state(third, "RUNNING")
    wait_for_info(
        ports["node1"],
        {("0", str(first), "training"), ("1", str(first), "training"), ("2", str(second), "training")},
    )
    wait_for_info(ports["node2"], {(str(g), str(third), "inference") for g in range(3)})

    # the epilog removes a finished job's GPUs and leaves the others
    slurm.run("scancel", str(first))
    wait_for_info(ports["node1"], {("2", str(second), "training")})
    slurm.run("scancel", str(second), str(third))
    wait_for_info(ports["node1"], set())
    wait_for_info(ports["node2"], set())
