"""Self metrics of a serving process, so that a fleet of exporters can be watched: CPU, memory, open file
descriptors, start time (the standard `process_*` names every Prometheus client library uses) and how long
the process takes to answer a scrape.

`ProcessCollector` reads /proc/self (Linux) at each scrape, about 0.05 ms; where /proc is missing it falls
back to `resource` and leaves out what it cannot know. `ScrapeStats` counts scrapes and the time spent
answering them (collect and render); a scrape reports the ones before it, as it cannot time itself.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from pathlib import Path

from foundation.exposition import MetricFamily, MetricSpec

PROCESS_CPU = MetricSpec("process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.")
PROCESS_RESIDENT_MEMORY = MetricSpec(
    "process_resident_memory_bytes", "gauge", "Resident memory size in bytes."
)
PROCESS_OPEN_FDS = MetricSpec("process_open_fds", "gauge", "Number of open file descriptors.")
PROCESS_MAX_FDS = MetricSpec("process_max_fds", "gauge", "Maximum number of open file descriptors.")
PROCESS_START_TIME = MetricSpec(
    "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds."
)
SCRAPES = MetricSpec("ibpool_exporter_scrapes_total", "counter", "Metrics requests answered.")
SCRAPE_DURATION = MetricSpec(
    "ibpool_exporter_scrape_duration_seconds_total",
    "counter",
    "Time spent answering metrics requests (collect and render); divide its rate by the scrapes' rate.",
)
LAST_SCRAPE_DURATION = MetricSpec(
    "ibpool_exporter_last_scrape_duration_seconds",
    "gauge",
    "How long the previous metrics request took to answer (collect and render).",
)
PROCESS_METRICS = (
    PROCESS_CPU,
    PROCESS_RESIDENT_MEMORY,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_START_TIME,
    SCRAPES,
    SCRAPE_DURATION,
    LAST_SCRAPE_DURATION,
)

_PROC = Path("/proc/self")


def _gauge(spec: MetricSpec, value: float) -> MetricFamily:
    family = MetricFamily(spec)
    family.add((), value)
    return family


class ProcessCollector:
    """The `process_*` metrics of this process (a collector: `collect`, `close`)."""

    name = "process"

    def __init__(self, proc: Path = _PROC) -> None:
        self._proc = proc
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._page = resource.getpagesize()
        self._start_time = self._read_start_time()

    def _read_start_time(self) -> float:
        """Unix time the process started: its start in ticks after boot, plus the boot time."""
        try:
            fields = (self._proc / "stat").read_text().rsplit(")", 1)[1].split()
            for line in Path("/proc/stat").read_text().splitlines():
                if line.startswith("btime "):
                    return int(line.split()[1]) + int(fields[19]) / self._ticks
        except (OSError, IndexError, ValueError):
            pass
        return time.time()

    def collect(self) -> list[MetricFamily]:
        """The process's figures now."""
        families = [_gauge(PROCESS_START_TIME, self._start_time)]
        try:
            fields = (self._proc / "stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / self._ticks
            resident = int(fields[21]) * self._page
        except (OSError, IndexError, ValueError):
            usage = resource.getrusage(resource.RUSAGE_SELF)
            cpu, resident = usage.ru_utime + usage.ru_stime, -1
        families.append(_gauge(PROCESS_CPU, cpu))
        if resident >= 0:
            families.append(_gauge(PROCESS_RESIDENT_MEMORY, resident))
        with contextlib.suppress(OSError):
            families.append(_gauge(PROCESS_OPEN_FDS, self._open_fds()))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY:
            families.append(_gauge(PROCESS_MAX_FDS, soft))
        return families

    def _open_fds(self) -> int:
        """Linux 6.2+ gives the count as the size of /proc/self/fd (2 us); older kernels need a listing
        (0.3 ms with the ~500 files an 8-port node's IB collector keeps open)."""
        fd_dir = self._proc / "fd"
        size = os.stat(fd_dir).st_size
        return size if size > 0 else len(os.listdir(fd_dir))

    def close(self) -> None:
        """Nothing to release."""


class ScrapeStats:
    """Scrapes answered and the time they took; thread-safe (scrapes may overlap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._seconds = 0.0
        self._last: float | None = None

    def observe(self, seconds: float) -> None:
        """Count one answered scrape that took `seconds`."""
        with self._lock:
            self._count += 1
            self._seconds += seconds
            self._last = seconds

    def families(self) -> list[MetricFamily]:
        """The scrapes before this one."""
        with self._lock:
            count, seconds, last = self._count, self._seconds, self._last
        families = [_gauge(SCRAPES, count), _gauge(SCRAPE_DURATION, seconds)]
        if last is not None:
            families.append(_gauge(LAST_SCRAPE_DURATION, last))
        return families
