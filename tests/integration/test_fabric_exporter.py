"""The fabric exporter against a real simulated fabric: ibsim + OpenSM + infiniband-diags.

Counters are set through ibsim's console and must come back exactly, on the node GUID ibsim reports for
that node (console `Dump`, not the exporter's own discovery) and the right port. Data counters move with
management traffic on cabled ports (discovery's SMPs cross them), so exact data values are set on
uncabled switch ports; error, wait and per-VL counters do not move and are set on cabled ones.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.families import build_families
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import Sweeper, SweepSettings
from foundation.commands import CommandRunner, scratch_parent, which
from foundation.exposition import render
from simulator.backends.ibsim_fabric import FatTree, IbsimFabric, missing_programs
from tests.helpers import samples_of
from tests.integration.processes import REPO, free_port, http_get, start_http_program, stop, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(missing_programs()), reason=f"not installed: {', '.join(missing_programs())}"),
]

PROMTOOL = shutil.which("promtool")
# 3 leaves x 3 HCAs, 2 spines, 8-port switches: leaf ports 1-3 HCAs, 4-5 uplinks, 6-8 uncabled.
TREE = FatTree(leaves=3, spines=2, hcas_per_leaf=3, ports=8)
SATURATED = 4294967295


def test_fat_tree_layout() -> None:
    tree = FatTree(leaves=2, spines=2, hcas_per_leaf=2, ports=6, links_per_pair=2)
    lines = tree.render().splitlines()
    assert lines[:5] == [
        'Switch 6 "spine1"',
        '[1] "leaf1"[3]',
        '[2] "leaf1"[4]',
        '[3] "leaf2"[3]',
        '[4] "leaf2"[4]',
    ]
    assert '[5] "spine2"[1]' in lines and '[1] "node1"[1]' in lines and '[1] "leaf2"[2]' in lines
    assert sum(line.startswith("[") for line in lines) == 2 * (2 * 2 * 2) + 2 * 2 * 2  # cable ends
    assert tree.switch_ports == 24 and tree.hca_names[-1] == "node4" and tree.hca_of(2, 1) == "node3"
    assert "# lid 0 4xEDR" in FatTree(speed="4xEDR").render()
    with pytest.raises(ValueError, match="too few ports"):
        FatTree(leaves=2, spines=4, hcas_per_leaf=4, ports=6)


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[IbsimFabric]:
    """A fresh fabric with OpenSM (LIDs assigned) per test; OpenSM is stopped before ibsim."""
    with IbsimFabric(tmp_path / "fabric", TREE) as running:
        running.start_opensm()
        yield running


class Exporter:
    """The exporter's sweep and mapping, in process, with the diagnostics attached to `fabric`."""

    def __init__(self, fabric: IbsimFabric, names: NameMap | None = None, **settings: object) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="ibpool-fabric-test-", dir=scratch_parent()))
        self.settings = SweepSettings(concurrency=3, **settings)  # type: ignore[arg-type]
        runner = CommandRunner(60.0, cwd=self.scratch, env=fabric.env)
        self.sweeper = Sweeper(DiagCommands(DiagOptions()), runner, self.settings, self.scratch)
        self.names = names or NameMap()

    def scrape(self) -> str:
        """One sweep, rendered as /metrics would serve it."""
        result = self.sweeper.sweep()
        return render(build_families(result, self.names, self.settings.hca_ports))

    def close(self) -> None:
        self.sweeper.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture
def exporter(fabric: IbsimFabric) -> Iterator[Exporter]:
    running = Exporter(fabric)
    yield running
    running.close()


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of the one sample of `name` whose labels include `labels` (None when absent)."""
    wanted = set(labels.items())
    found = [v for key, v in samples_of(text, name).items() if wanted <= set(key)]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} samples"
    return found[0] if found else None


def port(fabric: IbsimFabric, node: str, number: int) -> dict[str, str]:
    """Labels of a port, with the GUID as ibsim itself reports it."""
    return {"node_guid": fabric.node_guid(node), "port": str(number)}


def test_set_counters_come_back_exactly(fabric: IbsimFabric, exporter: Exporter) -> None:
    fabric.performance_set("leaf1", 1, "PortCounters", "SymbolErrorCounter", 7)
    fabric.performance_set("leaf1", 2, "PortCounters", "LinkDownedCounter", 3)
    fabric.performance_set("leaf1", 2, "PortCounters", "PortRcvErrors", 11)
    fabric.performance_set("leaf2", 3, "PortCounters", "PortXmitWait", SATURATED)
    fabric.performance_set("leaf2", 1, "PortCounters", "PortXmitWait", 123456)
    fabric.performance_set("spine2", 2, "PortCounters", "ExcessiveBufferOverrunErrors", 15)
    fabric.set_vl_xmit_wait("spine1", 2, 3, 42)
    fabric.set_vl_xmit_wait("spine2", 1, 0, 7)
    fabric.set_vl_xmit_wait("spine2", 1, 7, 65535)
    fabric.set_vl_xmit_wait("spine2", 1, 12, 1234)
    fabric.performance_set("leaf3", 7, "PortCountersExtended", "PortXmitData", 123456789012)
    fabric.performance_set("leaf3", 7, "PortCountersExtended", "PortRcvData", 5)
    fabric.performance_set("leaf3", 7, "PortCountersExtended", "PortUnicastXmitPkts", 77)
    # (ibsim 0.10 accepts PortMultiCastRcvPkts but never answers it: perfquery reads 0 there too)
    fabric.performance_set("leaf3", 8, "PortCountersExtended", "PortMultiCastXmitPkts", 9)

    text = exporter.scrape()
    expected = [
        ("ibpool_fabric_port_symbol_error_total", port(fabric, "leaf1", 1), 7),
        ("ibpool_fabric_port_link_downed_total", port(fabric, "leaf1", 2), 3),
        ("ibpool_fabric_port_errors_received_total", port(fabric, "leaf1", 2), 11),
        ("ibpool_fabric_port_transmit_wait_total", port(fabric, "leaf2", 3), SATURATED),
        ("ibpool_fabric_port_transmit_wait_total", port(fabric, "leaf2", 1), 123456),
        ("ibpool_fabric_port_excessive_buffer_overrun_errors_total", port(fabric, "spine2", 2), 15),
        ("ibpool_fabric_port_data_transmitted_bytes_total", port(fabric, "leaf3", 7), 123456789012 * 4),
        ("ibpool_fabric_port_data_received_bytes_total", port(fabric, "leaf3", 7), 5 * 4),
        ("ibpool_fabric_port_unicast_packets_transmitted_total", port(fabric, "leaf3", 7), 77),
        ("ibpool_fabric_port_multicast_packets_transmitted_total", port(fabric, "leaf3", 8), 9),
    ]
    for name, labels, wanted in expected:
        assert value(text, name, **labels) == wanted, (name, labels)
    assert value(text, "ibpool_fabric_port_vl_transmit_wait_total", **port(fabric, "spine1", 2), vl="3") == 42
    assert value(text, "ibpool_fabric_port_vl_transmit_wait_total", **port(fabric, "spine2", 1), vl="0") == 7
    assert (
        value(text, "ibpool_fabric_port_vl_transmit_wait_total", **port(fabric, "spine2", 1), vl="7") == 65535
    )
    assert (
        value(text, "ibpool_fabric_port_vl_transmit_wait_total", **port(fabric, "spine2", 1), vl="12") == 1234
    )
    flag = "ibpool_fabric_port_counter_saturated"
    assert value(text, flag, **port(fabric, "leaf2", 3), counter="port_xmit_wait") == 1
    assert value(text, flag, **port(fabric, "leaf2", 1), counter="port_xmit_wait") == 0
    assert value(text, "ibpool_fabric_port_symbol_error_total", **port(fabric, "leaf1", 2)) == 0
    up = samples_of(text, "ibpool_fabric_switch_up")
    assert len(up) == 5 and set(up.values()) == {1}
    assert set(samples_of(text, "ibpool_fabric_port_scrape_success").values()) == {1}
    assert len(samples_of(text, "ibpool_fabric_port_scrape_success")) == TREE.switch_ports

    # Reading never resets: a second sweep reads the same values.
    again = exporter.scrape()
    for name, labels, wanted in expected[:6]:
        assert value(again, name, **labels) == wanted, (name, labels)


def test_unlink_changes_topology_and_port_state(fabric: IbsimFabric, exporter: Exporter) -> None:
    leaf1_3 = port(fabric, "leaf1", 3)
    node3 = fabric.node_guid("node3")
    link = {**leaf1_3, "remote_guid": node3, "remote_port": "1", "remote_desc": "node3"}
    text = exporter.scrape()
    assert value(text, "ibpool_fabric_link_info", **link) == 1
    assert fabric.lid("node3") > 0 and fabric.lid("leaf1") != fabric.lid("leaf2")
    assert value(text, "ibpool_fabric_port_state_id", **leaf1_3) == 4
    assert value(text, "ibpool_fabric_port_physical_state_id", **leaf1_3) == 5
    assert value(text, "ibpool_fabric_port_rate_bytes_per_second", **leaf1_3) == 1_250_000_000  # 4X SDR
    links_before = len(samples_of(text, "ibpool_fabric_link_info"))

    fabric.unlink("leaf1", 3)
    text = exporter.scrape()
    assert value(text, "ibpool_fabric_link_info", **leaf1_3) is None
    assert len(samples_of(text, "ibpool_fabric_link_info")) == links_before - 1
    assert value(text, "ibpool_fabric_port_state_id", **leaf1_3) == 1  # Down
    assert value(text, "ibpool_fabric_port_physical_state_id", **leaf1_3) == 2  # Polling
    assert value(text, "ibpool_fabric_port_rate_bytes_per_second", **leaf1_3) is None
    assert value(text, "ibpool_fabric_switch_up", node_guid=leaf1_3["node_guid"]) == 1
    assert value(text, "ibpool_fabric_port_scrape_success", **leaf1_3) == 1  # the switch still answers

    fabric.relink("leaf1", 3)
    text = exporter.scrape()
    assert value(text, "ibpool_fabric_link_info", **link) == 1
    assert value(text, "ibpool_fabric_port_physical_state_id", **leaf1_3) == 5


def test_a_switch_that_does_not_answer_fails_only_its_own_ports(
    fabric: IbsimFabric, exporter: Exporter
) -> None:
    fabric.performance_set("leaf1", 1, "PortCounters", "SymbolErrorCounter", 7)
    fabric.set_error_rate("leaf2", 100, 1)  # drop every ClassPortInfo MAD leaf2 gets: perfquery fails
    leaf2 = fabric.node_guid("leaf2")
    text = exporter.scrape()
    assert value(text, "ibpool_fabric_switch_up", node_guid=leaf2) == 0
    success = samples_of(text, "ibpool_fabric_port_scrape_success")
    failed = {(dict(k)["node_guid"], dict(k)["port"]) for k, v in success.items() if v == 0}
    assert failed == {(leaf2, str(p)) for p in range(1, 9)}
    assert value(text, "ibpool_fabric_port_symbol_error_total", node_guid=leaf2, port="1") is None
    assert value(text, "ibpool_fabric_port_symbol_error_total", **port(fabric, "leaf1", 1)) == 7
    others = {
        k: v for k, v in samples_of(text, "ibpool_fabric_switch_up").items() if dict(k)["node_guid"] != leaf2
    }
    assert len(others) == 4 and set(others.values()) == {1}

    fabric.set_error_rate("leaf2", 0)
    text = exporter.scrape()
    assert value(text, "ibpool_fabric_switch_up", node_guid=leaf2) == 1


def test_a_switch_cut_off_the_fabric_is_reported_down(fabric: IbsimFabric, exporter: Exporter) -> None:
    leaf3 = fabric.node_guid("leaf3")
    assert value(exporter.scrape(), "ibpool_fabric_switch_up", node_guid=leaf3) == 1
    fabric.unlink("leaf3")  # every cable of leaf3: discovery no longer reaches it
    text = exporter.scrape()
    assert value(text, "ibpool_fabric_switch_up", node_guid=leaf3, node_desc="leaf3") == 0
    leaf3_ports = {
        k: v
        for k, v in samples_of(text, "ibpool_fabric_port_scrape_success").items()
        if (("node_guid", leaf3) in k)
    }
    assert len(leaf3_ports) == 8 and set(leaf3_ports.values()) == {0}
    others = {
        k: v for k, v in samples_of(text, "ibpool_fabric_switch_up").items() if ("node_guid", leaf3) not in k
    }
    assert len(others) == 4 and set(others.values()) == {1}
    assert value(text, "ibpool_fabric_port_state_id", **port(fabric, "spine1", 3)) == 1


def test_batch_and_perfquery_vl_readers_agree(fabric: IbsimFabric) -> None:
    fabric.set_vl_xmit_wait("leaf2", 4, 1, 1000)
    fabric.set_vl_xmit_wait("spine1", 3, 6, 66)
    texts = {}
    for mode in ("batch", "perfquery"):
        running = Exporter(fabric, vl_counters=mode)
        try:
            texts[mode] = samples_of(running.scrape(), "ibpool_fabric_port_vl_transmit_wait_total")
        finally:
            running.close()
    assert texts["batch"] == texts["perfquery"]
    assert len(texts["batch"]) == TREE.switch_ports * 16
    leaf2_4 = {**port(fabric, "leaf2", 4), "node_desc": "leaf2", "vl": "1"}
    assert texts["batch"][tuple(sorted(leaf2_4.items()))] == 1000


def test_hca_ports(fabric: IbsimFabric) -> None:
    fabric.performance_set("node5", 1, "PortCounters", "SymbolErrorCounter", 5)
    fabric.performance_set("node5", 1, "PortCounters", "PortXmitWait", 99)
    fabric.set_vl_xmit_wait("node5", 1, 2, 12)
    names = NameMap({fabric.node_guid("node5"): "gpu-005"})
    running = Exporter(fabric, names, hca_ports=True)
    try:
        text = running.scrape()
    finally:
        running.close()
    node5 = {**port(fabric, "node5", 1), "node_desc": "gpu-005"}
    assert value(text, "ibpool_fabric_port_symbol_error_total", **node5) == 5
    assert value(text, "ibpool_fabric_port_transmit_wait_total", **node5) == 99
    assert value(text, "ibpool_fabric_port_vl_transmit_wait_total", **node5, vl="2") == 12
    assert value(text, "ibpool_fabric_port_scrape_success", **node5) == 1
    assert value(text, "ibpool_fabric_port_state_id", **node5) == 4
    hca_ports = [k for k in samples_of(text, "ibpool_fabric_port_scrape_success") if ("port", "1") in k]
    assert len(hca_ports) == len(TREE.hca_names) + 5  # every HCA port, and port 1 of each switch


# --- the command as an operator runs it ---------------------------------------------------------------


def _promtool_problems(text: str) -> list[str]:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert result.returncode in (0, 3), lines  # 3: lint notes only
    # The contract names ibpool_fabric_port_counter_saturated; promtool dislikes "counter" in a name.
    return [line for line in lines if "should not include type 'counter'" not in line]


def _start_exporter(fabric: IbsimFabric, scratch: Path, *flags: str) -> tuple[subprocess.Popen[bytes], int]:
    """`ibpool fabric-exporter` on a free port with `flags`, once it answers; (process, port)."""
    scratch.mkdir()
    listen = free_port()
    argv = [
        sys.executable,
        "-m",
        "exporter.fabric.main",
        f"--web.listen-address=127.0.0.1:{listen}",
        f"--fabric.scratch-dir={scratch}",
        *flags,
    ]
    # The preload and IBSIM_SOCKNAME reach the diagnostics through the exporter's own environment.
    env = {k: fabric.env[k] for k in ("LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST")}
    return start_http_program(argv, listen, env=env, timeout=60), listen


def _metrics(port_number: int) -> str:
    status, body = http_get(port_number, "/metrics")
    assert status == 200
    return body.decode()


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian: prometheus)")
def test_fabric_exporter_command_end_to_end(fabric: IbsimFabric, tmp_path: Path) -> None:
    fabric.performance_set("leaf2", 2, "PortCounters", "SymbolErrorCounter", 21)
    fabric.set_vl_xmit_wait("spine2", 3, 5, 500)
    names = tmp_path / "names.txt"
    names.write_text(f'{fabric.node_guid("leaf2")} "leaf-02 (row B)"\n')
    scratch = tmp_path / "scratch"
    flags = (
        "--fabric.sweep-interval-seconds=0.5",
        "--fabric.concurrency=3",
        f"--fabric.node-name-map={names}",
    )
    proc, listen = _start_exporter(fabric, scratch, *flags)
    try:
        wait_until(lambda: "ibpool_fabric_sweep_timestamp_seconds" in _metrics(listen), 60, "a first sweep")
        text = _metrics(listen)
        leaf2 = {**port(fabric, "leaf2", 2), "node_desc": "leaf-02 (row B)"}
        assert value(text, "ibpool_fabric_port_symbol_error_total", **leaf2) == 21
        assert (
            value(text, "ibpool_fabric_port_vl_transmit_wait_total", **port(fabric, "spine2", 3), vl="5")
            == 500
        )
        assert set(samples_of(text, "ibpool_fabric_switch_up").values()) == {1}
        assert value(text, "ibpool_exporter_collector_success", collector="fabric") == 1
        routes = samples_of(text, "ibpool_fabric_port_route_info")  # read by default (every 300 s)
        assert len(routes) == TREE.switch_ports and set(routes.values()) == {1}
        assert _promtool_problems(text) == []

        # Background sweeps pick up a change without a restart.
        fabric.performance_set("leaf2", 2, "PortCounters", "SymbolErrorCounter", 22)
        wait_until(
            lambda: value(_metrics(listen), "ibpool_fabric_port_symbol_error_total", **leaf2) == 22,
            60,
            "the next sweep to show the new value",
        )
        status, body = http_get(listen, "/healthz")
        assert status == 200, body
    finally:
        code = stop(proc, timeout=60)
    assert code == 0
    assert list(scratch.iterdir()) == []  # its scratch directory (and umad2sim's trees) are gone


TOOLS = ("ibnetdiscover", "iblinkinfo", "perfquery", "smpquery", "ibroute")
FAILING_TOOL = "#!/bin/sh\necho 'ibwarn: umad port gone (test)' >&2\nexit 1\n"


def _install_tools(bin_dir: Path, working: bool) -> None:
    """Point `bin_dir`'s diagnostics at the real programs, or at scripts that fail (atomic swaps)."""
    for name in TOOLS:
        staged = bin_dir / f".{name}.new"
        if working:
            real = which(name)
            assert real is not None, name
            staged.symlink_to(real)
        else:
            staged.write_text(FAILING_TOOL)
            staged.chmod(0o755)
        staged.replace(bin_dir / name)


def _fabric_success(text: str) -> float | None:
    return value(text, "ibpool_exporter_collector_success", collector="fabric")


def test_when_every_diagnostic_fails_old_links_are_aged_then_withdrawn(
    fabric: IbsimFabric, tmp_path: Path
) -> None:
    max_age = 5.0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _install_tools(bin_dir, working=True)
    proc, listen = _start_exporter(
        fabric,
        tmp_path / "scratch",
        "--fabric.sweep-interval-seconds=0.3",
        "--fabric.vl-counters=perfquery",  # every read through a program in bin_dir (no batch helper)
        f"--ibdiag.bin-dir={bin_dir}",
        f"--health.max-age-seconds={max_age:g}",
    )
    try:
        wait_until(
            lambda: _fabric_success(_metrics(listen)) == 1 and "ibpool_fabric_link_info" in _metrics(listen),
            60,
            "a first good sweep",
        )
        good = _metrics(listen)
        links = samples_of(good, "ibpool_fabric_link_info")
        assert len(links) == 3 * (3 + 2) + 2 * 3  # every cabled switch port: leaves 3 HCAs + 2 up, spines 3
        complete = value(good, "ibpool_fabric_sweeps_total", result="complete")
        assert complete is not None

        _install_tools(bin_dir, working=False)
        seen: list[str] = []

        def withdrawn() -> bool:
            seen.append(_metrics(listen))
            return _fabric_success(seen[-1]) == 0

        wait_until(withdrawn, 60, "the fabric collector to fail on the old topology")
        for text in seen:  # whatever was still served as current was within the bound, with its age
            if _fabric_success(text) == 1:
                age = value(text, "ibpool_fabric_topology_age_seconds")
                assert age is not None and age <= max_age
        stale = seen[-1]
        assert "ibpool_fabric_link_info" not in stale and "ibpool_fabric_switch_up" not in stale
        age = value(stale, "ibpool_fabric_topology_age_seconds")
        assert age is not None and age > max_age
        assert (value(stale, "ibpool_fabric_sweeps_total", result="complete") or 0) > complete + 1
        status, body = http_get(listen, "/healthz")
        assert status == 503 and b"fabric topology is" in body, body

        _install_tools(bin_dir, working=True)
        wait_until(
            lambda: samples_of(_metrics(listen), "ibpool_fabric_link_info") == links,
            60,
            "the next good sweep to serve the links again",
        )
        recovered = _metrics(listen)
        assert _fabric_success(recovered) == 1
        assert (value(recovered, "ibpool_fabric_topology_age_seconds") or 0) <= max_age
    finally:
        code = stop(proc, timeout=60)
    assert code == 0


def test_invalid_configuration_exits_2() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter.fabric.main",
            "--fabric.vl-counters=sometimes",
            "--fabric.concurrency=0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2
    assert "vl_counters" in result.stderr and "concurrency" in result.stderr
