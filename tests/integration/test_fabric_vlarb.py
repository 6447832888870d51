"""Live VL weights: `ibpool fabric-exporter` against ibsim + a QoS-enabled OpenSM, changed by the hook.

The exporter's /metrics must show, on every active switch port, the weights of OpenSM's configured
`qos_vlarb_high`/`qos_vlarb_low`; after the OpenSM adapter applies new weights (the path `ibpool apply`
takes: rewrite opensm.conf, SIGHUP, verify with smpquery), a later sweep shows the new ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation.vlarb import weights_by_vl
from proposals import targets
from scheduler_hooks.opensm import Change
from tests.helpers import samples_of
from tests.integration.processes import free_port, http_get, ibpool_argv, start_http_program, stop, wait_until
from tests.scheduler_hooks.opensm.lab import BASELINE, TREE, Lab, missing
from tests.simulator.serve.helpers import PROMTOOL, promtool_problems

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(missing()), reason=f"not installed: {', '.join(missing())}"),
]


# Linked switch ports in the lab's tree: 2 leaves x (3 HCAs + 1 uplink) + the spine's 2 downlinks.
LINKED_SWITCH_PORTS = TREE.leaves * (TREE.hcas_per_leaf + TREE.spines) + TREE.spines * TREE.leaves
Weights = dict[tuple[str, int], float]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """ibsim + OpenSM with the recipe's QoS settings; OpenSM is stopped before ibsim."""
    running = Lab(tmp_path / "lab").start()
    try:
        yield running
    finally:
        running.stop()


def configured(lab: Lab) -> Weights:
    """The weights per (table, VL) that opensm.conf asks for."""
    lines = dict(
        line.split(None, 1)
        for line in (lab.osm_dir / "opensm.conf").read_text().splitlines()
        if line.startswith(("qos_vlarb_high ", "qos_vlarb_low "))
    )
    out: Weights = {}
    for table in ("high", "low"):
        for vl, weight in weights_by_vl(targets.parse_vlarb(lines[f"qos_vlarb_{table}"].strip())).items():
            out[(table, vl)] = weight
    return out


def live(text: str) -> dict[tuple[str, str], Weights]:
    """Live weights per switch port (node_guid, port) from an exposition."""
    out: dict[tuple[str, str], Weights] = {}
    for labels, value in samples_of(text, "ibpool_vl_weight").items():
        got = dict(labels)
        assert got["source"] == "live"
        out.setdefault((got["node_guid"], got["port"]), {})[(got["table"], int(got["vl"]))] = value
    return out


def metrics(port: int) -> str:
    status, body = http_get(port, "/metrics")
    assert status == 200
    return body.decode()


def everywhere(text: str, expected: Weights) -> bool:
    ports = live(text)
    return len(ports) == LINKED_SWITCH_PORTS and all(w == expected for w in ports.values())


def test_live_weights_follow_opensm_and_the_hook(lab: Lab, tmp_path: Path) -> None:
    baseline = configured(lab)
    assert baseline[("low", 1)] == 64 and baseline[("high", 0)] == 4
    listen = free_port()
    argv = ibpool_argv(
        "fabric-exporter",
        f"--web.listen-address=127.0.0.1:{listen}",
        "--fabric.sweep-interval-seconds=0.5",
        "--fabric.concurrency=2",
        "--fabric.vl-counters=off",
        "--fabric.vlarb-ports=all",
        f"--fabric.scratch-dir={lab.scratch}",
    )
    env = {k: lab.fabric.env[k] for k in ("LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST")}
    proc = start_http_program(argv, listen, env=env, timeout=60)
    try:
        wait_until(lambda: "ibpool_vl_weight" in metrics(listen), 60, "a first sweep with VL weights")
        text = metrics(listen)
        assert everywhere(text, baseline), live(text)
        success = samples_of(text, "ibpool_fabric_port_vlarb_scrape_success")
        assert len(success) == LINKED_SWITCH_PORTS and set(success.values()) == {1}
        if PROMTOOL is not None:
            assert promtool_problems(text) == []

        changes = [
            Change(
                "opensm.vlarb_low", BASELINE["opensm.vlarb_low"], "0:0,1:128,2:64,3:32,4:16,5:8,6:4,7:200"
            ),
            Change("opensm.vlarb_high", BASELINE["opensm.vlarb_high"], "0:16,1:8"),
        ]
        with lab.adapter(tmp_path / "state") as adapter:
            _, result = adapter.apply_verified(changes)
        assert result.ok, result.describe()
        wanted = configured(lab)
        assert wanted != baseline and wanted[("low", 7)] == 200 and wanted[("high", 1)] == 8
        wait_until(lambda: everywhere(metrics(listen), wanted), 60, "a sweep showing the new weights")
    finally:
        code = stop(proc, timeout=60)
    assert code == 0
