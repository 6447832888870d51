"""Helpers shared by the cluster server tests: exposition checks and small models."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess

from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec
from tests.helpers import samples_of

PROMTOOL = shutil.which("promtool")
# promtool's lint wants no `_saturated`-like type suffixes on gauges; the catalog keeps the §3 names.
ACCEPTED_LINT = "should not include type"


def promtool_problems(text: str) -> list[str]:
    """What `promtool check metrics` says about an exposition, less the accepted lint notes."""
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    lines = (result.stdout + result.stderr).splitlines()
    problems = [line for line in lines if line.strip() and ACCEPTED_LINT not in line]
    if result.returncode not in (0, 3):
        problems.append(f"promtool exited {result.returncode}")
    return problems


def value(text: str, name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels include `labels`, or None."""
    wanted = set(labels.items())
    found = [v for key, v in samples_of(text, name).items() if wanted <= set(key)]
    assert len(found) <= 1, f"{name}{labels}: {len(found)} samples"
    return found[0] if found else None


def congested_model(seconds: float = 60.0) -> ClusterModel:
    """Two pools whose rings share leaf001/5 and leaf002/5 (oversubscribed uplinks), run `seconds`."""
    model = ClusterModel(shared_uplink_spec())
    model.submit(chatty("hi"))
    model.submit(chatty("lo"))
    model.advance(seconds)
    return model


def post(port: int, path: str, body: bytes = b"") -> tuple[int, dict[str, object]]:
    """POST `body` to the cluster server; (status, decoded JSON answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()
