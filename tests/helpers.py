"""Small helpers shared by the tests."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from foundation.exposition import MetricSpec

FAMILY_SPEC = MetricSpec("ibpool_test_family", "gauge", "A test family.", ("name",))

Samples = dict[tuple[tuple[str, str], ...], float]


def samples_of(text: str, name: str) -> Samples:
    """Samples of metric `name` (full sample name) in an exposition, keyed by sorted label items."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


# Third-party data copied into the repository (data/README.md: origin and licence).
DATA = Path(__file__).resolve().parents[1] / "data"
SYSFS_FIXTURES = DATA / "procfs-sysfs"
TRACE = DATA / "traces" / "helios-earth-may01-10.csv.gz"


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.005) -> bool:
    """Poll until `predicate()` holds; False after `timeout` seconds (bounded, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


@contextmanager
def mounted_tmpfs(size: str, prefix: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. `64k`) mounted on a new directory, unmounted after (needs root; skips the
    test where it cannot mount)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False)
    if mounted.returncode != 0:
        path.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)  # even with files open
        path.rmdir()
