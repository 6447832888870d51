"""Job attribution from the mapping directory."""

from __future__ import annotations

from pathlib import Path

from exporter.collectors.jobs import JobsCollector
from exporter.sources.job_map import JobMapSource
from foundation.exposition import render
from tests.helpers import samples_of


def test_jobs_are_mapped_and_bad_files_skipped_and_counted(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("job=101\npool=training\n")
    (tmp_path / "1").write_text("# comment\njob=102\npool=inference\nuuid=GPU-abc\n")
    (tmp_path / "2").write_text("garbage without equals\n")
    (tmp_path / "3").mkdir()
    (tmp_path / "notanumber").write_text("job=1\n")
    (tmp_path / ".4.tmp").write_text("job=half")
    (tmp_path / "5").write_bytes(b"job=\xff\xfe\n")
    collector = JobsCollector(JobMapSource(tmp_path), uuid_of=lambda gpu: f"GPU-{gpu}")
    text = render(collector.collect())
    info = samples_of(text, "ibpool_gpu_job_info")
    assert info == {
        (("gpu", "0"), ("job", "101"), ("pool", "training"), ("uuid", "GPU-0")): 1.0,
        (("gpu", "1"), ("job", "102"), ("pool", "inference"), ("uuid", "GPU-abc")): 1.0,
    }
    errors = samples_of(text, "ibpool_exporter_job_map_errors_total")
    assert errors == {
        (("reason", "bad_name"),): 1.0,
        (("reason", "malformed"),): 2.0,
        (("reason", "not_a_file"),): 1.0,
    }


def test_missing_directory_means_no_jobs(tmp_path: Path) -> None:
    collector = JobsCollector(JobMapSource(tmp_path / "absent"))
    assert samples_of(render(collector.collect()), "ibpool_gpu_job_info") == {}


def test_an_epilog_removing_the_file_removes_the_sample(tmp_path: Path) -> None:
    (tmp_path / "7").write_text("job=9\npool=p\n")
    collector = JobsCollector(JobMapSource(tmp_path))
    assert samples_of(render(collector.collect()), "ibpool_gpu_job_info")
    (tmp_path / "7").unlink()
    assert samples_of(render(collector.collect()), "ibpool_gpu_job_info") == {}
