"""deploy/slurm/ibpool-prolog and ibpool-epilog run by /bin/sh with the environment Slurm gives them.

Slurm runs them with an environment of its own (no PATH; SLURM_JOB_ID, SLURM_JOB_GPUS, SLURM_JOB_PARTITION,
SLURMD_NODENAME, ...), so every run here starts from an empty environment. What they write is read back
with the exporter's own reader (`JobMapSource`). tests/integration/test_slurm_prolog.py runs them in a
real Slurm cluster.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from exporter.sources.job_map import GpuJob, JobMapSource

REPO = Path(__file__).resolve().parents[2]
PROLOG = REPO / "deploy" / "slurm" / "ibpool-prolog"
EPILOG = REPO / "deploy" / "slurm" / "ibpool-epilog"


def run(script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`script` as Slurm runs it: executable, empty environment plus `env`."""
    return subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=30, check=False)


def job_env(directory: Path, job: str, gpus: str, partition: str = "training") -> dict[str, str]:
    return {
        "IBPOOL_JOBS_DIRECTORY": str(directory),
        "SLURM_JOB_ID": job,
        "SLURM_JOB_GPUS": gpus,
        "SLURM_JOB_PARTITION": partition,
        "SLURMD_NODENAME": "node7",
    }


def jobs(directory: Path) -> list[GpuJob]:
    snapshot = JobMapSource(directory).read()
    assert snapshot.errors == {}
    return list(snapshot.jobs)


def test_the_scripts_are_executable() -> None:
    assert os.access(PROLOG, os.X_OK) and os.access(EPILOG, os.X_OK)


def test_prolog_writes_one_file_per_gpu_that_the_exporter_reads(tmp_path: Path) -> None:
    directory = tmp_path / "jobs"
    assert run(PROLOG, **job_env(directory, "4242", "0,2-3")).returncode == 0
    assert jobs(directory) == [GpuJob(g, "4242", "training", None) for g in (0, 2, 3)]
    assert not [p for p in directory.iterdir() if p.name.startswith(".")], "no dot-file left behind"


def test_node_name_in_the_directory_and_jobs_without_gpus(tmp_path: Path) -> None:
    env = job_env(tmp_path / "%n" / "jobs", "12", "1")
    assert run(PROLOG, **env).returncode == 0
    assert jobs(tmp_path / "node7" / "jobs") == [GpuJob(1, "12", "training", None)]
    assert run(PROLOG, **{**env, "SLURM_JOB_GPUS": "", "SLURM_JOB_ID": "13"}).returncode == 0
    assert [j.job for j in jobs(tmp_path / "node7" / "jobs")] == ["12"]


def test_epilog_removes_this_jobs_files_only(tmp_path: Path) -> None:
    directory = tmp_path / "jobs"
    run(PROLOG, **job_env(directory, "100", "0,1"))
    run(PROLOG, **job_env(directory, "1000", "2", "inference"))  # 100 is a prefix of 1000: not its file
    (directory / ".5.100").write_text("job=100\n")  # a prolog that died half-way
    assert run(EPILOG, **job_env(directory, "100", "")).returncode == 0
    assert jobs(directory) == [GpuJob(2, "1000", "inference", None)]
    assert sorted(p.name for p in directory.iterdir()) == ["2"]
    assert run(EPILOG, **job_env(directory, "1000", "2")).returncode == 0
    assert list(directory.iterdir()) == []


@pytest.mark.parametrize(
    ("job", "gpus", "partition"),
    [("12x", "0", "training"), ("12", "0,a", "training"), ("12", "0", "bad name\n")],
)
def test_bad_input_writes_nothing_wrong_and_never_fails_the_job(
    tmp_path: Path, job: str, gpus: str, partition: str
) -> None:
    directory = tmp_path / "jobs"
    result = run(PROLOG, **job_env(directory, job, gpus, partition))
    assert result.returncode == 0
    written = jobs(directory) if directory.exists() else []
    assert all(j.job == "12" and j.pool == "training" for j in written)
    assert [j.gpu for j in written] == ([0] if gpus == "0,a" else [])


def test_an_unwritable_directory_never_fails_the_job(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run(PROLOG, **job_env(blocker / "jobs", "7", "0"))
    assert result.returncode == 0
    assert run(EPILOG, **job_env(blocker / "jobs", "7", "0")).returncode == 0
