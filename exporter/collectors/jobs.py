"""Maps the job mapping directory to `ibpool_gpu_job_info`."""

from __future__ import annotations

from collections.abc import Callable

from exporter import catalog
from exporter.sources.job_map import JobMapSource
from foundation.exposition import MetricFamily


class JobsCollector:
    """`ibpool_gpu_job_info{gpu,uuid,job,pool}` for every assigned GPU, plus skipped files by reason."""

    name = "jobs"

    def __init__(self, source: JobMapSource, uuid_of: Callable[[int], str | None] | None = None) -> None:
        self._source = source
        self._uuid_of = uuid_of
        self._errors: dict[str, int] = {}

    def collect(self) -> list[MetricFamily]:
        """Read the directory once and map it."""
        snapshot = self._source.read()
        info = MetricFamily(catalog.GPU_JOB_INFO)
        for job in snapshot.jobs:
            uuid = job.uuid or (self._uuid_of(job.gpu) if self._uuid_of else None) or ""
            info.add_info((str(job.gpu), uuid, job.job, job.pool))
        for reason, count in snapshot.errors.items():
            self._errors[reason] = self._errors.get(reason, 0) + count
        errors = MetricFamily(catalog.JOB_MAP_ERRORS)
        for reason, count in sorted(self._errors.items()):
            errors.add((reason,), count)
        return [info, errors]

    def close(self) -> None:
        """Nothing to release."""
