"""Shared pieces of the scrape benchmarks: start a server process, scrape it, summarise timings."""

from __future__ import annotations

import http.client
import os
import socket
import statistics
import subprocess
import time
from dataclasses import dataclass


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    argv: list[str], port: int, path: str = "/metrics", timeout: float = 20.0
) -> subprocess.Popen[bytes]:
    """Start a server process and wait until `path` answers 200."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"{argv[0]} exited with {proc.returncode}: {err[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{argv[0]} did not answer on port {port}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate and reap a server process."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Scraper:
    """A keep-alive HTTP client, as Prometheus scrapes."""

    def __init__(self, port: int, path: str = "/metrics", gzip: bool = False) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.path = path
        self.headers = {"Accept-Encoding": "gzip"} if gzip else {}

    def scrape(self) -> tuple[float, bytes]:
        """One GET; returns (seconds, body)."""
        start_time = time.perf_counter()
        self.conn.request("GET", self.path, headers=self.headers)
        body = self.conn.getresponse().read()
        return time.perf_counter() - start_time, body


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass(frozen=True)
class Summary:
    """Timing figures of a series, in milliseconds."""

    p50: float
    p99: float
    mean: float

    @classmethod
    def of(cls, seconds: list[float]) -> Summary:
        """Summarise a list of durations in seconds."""
        ms = sorted(s * 1000 for s in seconds)
        return cls(statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))], statistics.fmean(ms))

    def __str__(self) -> str:
        return f"p50 {self.p50:.3f} ms  p99 {self.p99:.3f} ms  mean {self.mean:.3f} ms"
