"""Every ibpool service of compose.yaml runs its own command with the real CLI and passes its healthcheck.

Each service's `command` runs as `ibpool <command>` on a free loopback port (the compose hostnames point
at loopback: `prometheus:9090` at a real Prometheus started here), and its `healthcheck` test runs as
written, with this interpreter as `python`, until it exits 0. A command the CLI rejects (exit 2, e.g. an
unknown flag) or a service that never turns healthy fails the test, which is what a crash-looping
container looks like.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration import prometheus_server
from tests.integration.processes import free_port, ibpool_argv, stop, wait_until
from tests.integration.prometheus_server import PROMETHEUS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
]

REPO = Path(__file__).resolve().parents[2]
SERVICES: dict[str, Any] = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
IBPOOL = sorted(name for name, service in SERVICES.items() if service.get("image") == "ibpool:local")
LISTEN = "--web.listen-address"


def localized(words: list[str], ports: dict[str, str], hosts: dict[str, str]) -> list[str]:
    """`words` with `:PORT` listen addresses and `host:port` URLs moved to loopback."""
    out = []
    for word in words:
        moved = word
        for old, new in {**ports, **hosts}.items():
            moved = moved.replace(old, new)
        out.append(moved)
    return out


@contextmanager
def service(name: str, workdir: Path, hosts: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """The service's command running on a free port until its healthcheck passes."""
    command: list[str] = SERVICES[name]["command"]
    port = command[command.index(LISTEN) + 1].rsplit(":", 1)[1]
    local = str(free_port())
    ports = {f":{port}": f"127.0.0.1:{local}"}
    log = workdir / f"{name}.log"
    env = {"IBPOOL_DB": str(workdir / f"{name}.db"), "PATH": "/usr/bin:/bin"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ibpool_argv(*localized(command, ports, hosts)), cwd=workdir, stdout=out, stderr=out, env=env
        )
    try:
        test = SERVICES[name]["healthcheck"]["test"]
        assert test[0] == "CMD", f"{name}: healthcheck must be an exec form"
        check = [sys.executable if word == "python" else word for word in test[1:]]
        check = localized(check, {f"127.0.0.1:{port}": f"127.0.0.1:{local}"}, {})

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}: {log.read_text()[-2000:]}")
            return subprocess.run(check, capture_output=True, timeout=10, check=False).returncode == 0

        wait_until(healthy, 90.0, f"{name}'s healthcheck to pass")
        yield proc
    finally:
        stop(proc)


def test_the_ibpool_services_are_the_simulated_cluster_and_the_recommender() -> None:
    assert IBPOOL == ["cluster", "recommender"]
    for name in IBPOOL:
        assert SERVICES[name]["healthcheck"]["test"][-1].endswith("/healthz"), name


def test_every_ibpool_service_comes_up_healthy(tmp_path: Path) -> None:
    with ExitStack() as stack:
        prom = stack.enter_context(prometheus_server.running("global: {scrape_interval: 15s}\n"))
        hosts = {"http://prometheus:9090": prom.url}
        for name in IBPOOL:
            proc = stack.enter_context(service(name, tmp_path, hosts))
            assert proc.poll() is None, name
