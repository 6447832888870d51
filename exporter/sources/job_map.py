"""The GPU-to-job mapping directory that a scheduler prolog writes and an epilog clears.

One file per GPU, named by the GPU's index (`0` .. `7`), holding `key=value` lines:

```
job=123456
pool=training
uuid=GPU-5f1c...        # optional; the GPU collector's UUID is used when absent
```
Blank lines and lines starting with `#` are ignored; files whose names start with `.` are ignored (write
a dot-file and rename it into place so the exporter never reads half a file).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 4096


@dataclass(frozen=True)
class GpuJob:
    """One GPU's assignment."""

    gpu: int
    job: str
    pool: str
    uuid: str | None


@dataclass(frozen=True)
class JobMapSnapshot:
    """Every readable assignment, and the files skipped by reason."""

    jobs: tuple[GpuJob, ...]
    errors: dict[str, int]


class JobMapSource:
    """Reads the mapping directory on every call; a missing directory means no jobs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._warned: set[str] = set()

    def read(self) -> JobMapSnapshot:
        """All assignments currently in the directory."""
        errors: dict[str, int] = {}
        jobs: list[GpuJob] = []
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return JobMapSnapshot((), errors)
        for entry in entries:
            if entry.name.startswith("."):
                continue
            job, reason = self._read_one(entry)
            if job is not None:
                jobs.append(job)
            elif reason is not None:
                errors[reason] = errors.get(reason, 0) + 1
                self._warn_once(entry.path, reason)
        jobs.sort(key=lambda j: j.gpu)
        return JobMapSnapshot(tuple(jobs), errors)

    def _read_one(self, entry: os.DirEntry[str]) -> tuple[GpuJob | None, str | None]:
        if not entry.name.isdigit():
            return None, "bad_name"
        try:
            if not entry.is_file():
                return None, "not_a_file"
            with open(entry.path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None, None  # removed by an epilog while we listed: not an error
        except OSError:
            return None, "unreadable"
        if len(raw) > MAX_FILE_BYTES:
            return None, "too_large"
        fields = _parse(raw)
        if fields is None or not fields.get("job"):
            return None, "malformed"
        return GpuJob(int(entry.name), fields["job"], fields.get("pool", ""), fields.get("uuid")), None

    def _warn_once(self, path: str, reason: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            log.warning("skipping job mapping file %s: %s", path, reason)


def _parse(raw: bytes) -> dict[str, str] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fields: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or key.strip() not in ("job", "pool", "uuid"):
            return None
        fields[key.strip()] = value.strip()
    return fields
