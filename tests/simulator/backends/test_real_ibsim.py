"""The model behind a real ibsim + OpenSM: pushed counters come back through the real fabric exporter
sweep, and a QoS change made on OpenSM (opensm.conf + SIGHUP) changes what the model does next."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.fabric.config import FabricConfig
from exporter.fabric.families import build_families
from exporter.fabric.main import build_sweeper
from exporter.fabric.model import format_guid
from exporter.fabric.names import NameMap
from foundation.commands import scratch_parent
from foundation.exposition import render
from simulator.backends.ibsim_console import IbsimConsole
from simulator.backends.ibsim_counters import saturate
from simulator.backends.ibsim_fabric import IbsimFabric, missing_programs
from simulator.backends.ibsim_mirror import IbsimMirror
from simulator.backends.ibsim_net import first_hca, render_net
from simulator.backends.qos_read import OpenSMConf, Smpquery
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec
from simulator.cluster.views import PortView
from tests.helpers import samples_of, wait_for

MISSING = missing_programs() + [
    p for p in ("smpquery",) if shutil.which(p, path="/usr/sbin:/usr/bin") is None
]
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        bool(MISSING), reason=f"not installed: {', '.join(MISSING)} (ibsim-utils, opensm, ...)"
    ),
]
# The recipe's OpenSM QoS options (RECIPES.md): VL0 4 (high table), VL1..7 64, 32, ... (low table).
QOS = {
    "qos": "TRUE",
    "qos_max_vls": "8",
    "qos_high_limit": "4",
    "qos_vlarb_high": "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0",
    "qos_vlarb_low": "0:0,1:64,2:32,3:16,4:8,5:4,6:2,7:1",
    "qos_sl2vl": "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7",
}


def congested_model() -> ClusterModel:
    """Two leaves sharing one uplink; `hi` (VL1) and `lo` (VL0) each run a chatty 16-GPU job over it."""
    model = ClusterModel(shared_uplink_spec())
    model.submit(chatty("hi"))
    model.submit(chatty("lo"))
    return model


@pytest.fixture
def model() -> ClusterModel:
    return congested_model()


@pytest.fixture
def fabric(tmp_path: Path, model: ClusterModel) -> Iterator[IbsimFabric]:
    """ibsim running the model's fabric, with OpenSM (QoS on); OpenSM is stopped before ibsim."""
    with IbsimFabric(
        tmp_path / "fabric", render_net(model.topology), attach=first_hca(model.topology)
    ) as running:
        running.start_opensm(QOS)
        yield running


def sweep(fabric: IbsimFabric, monkeypatch: pytest.MonkeyPatch) -> str:
    """One sweep of the real exporter code (diagnostics attached as the exporter's environment says)."""
    for key in ("LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST"):
        monkeypatch.setenv(key, fabric.env[key])
    cfg = FabricConfig(concurrency=2, command_timeout_seconds=30.0)
    workdir = Path(tempfile.mkdtemp(prefix="ibpool-backends-", dir=scratch_parent()))
    sweeper = build_sweeper(cfg, workdir)
    try:
        result = sweeper.sweep()
    finally:
        sweeper.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return render(build_families(result, NameMap(), cfg.hca_ports, cfg.vl_count))


def reported(text: str, name: str, view: PortView, **labels: str) -> float | None:
    """The exporter's value of `name` for the model port `view` (by the model's GUID and port)."""
    wanted = {("node_guid", format_guid(view.node_guid)), ("port", str(view.port)), *labels.items()}
    found = [v for key, v in samples_of(text, name).items() if wanted <= set(key)]
    assert len(found) <= 1
    return found[0] if found else None


def assert_exporter_reports_the_model(text: str, model: ClusterModel) -> int:
    """Every switch port's wait, error and per-VL wait counters; returns how many were non-zero."""
    nonzero = 0
    for view in model.fabric_view(include_hcas=False).ports:
        c = view.counters
        expected = {
            "ibpool_fabric_port_transmit_wait_total": c["port_xmit_wait"],
            "ibpool_fabric_port_symbol_error_total": c["symbol_error"],
            "ibpool_fabric_port_link_downed_total": c["link_downed"],
        }
        for name, wanted in expected.items():
            assert reported(text, name, view) == wanted, (name, view.node_desc, view.port)
            nonzero += wanted > 0
        for vl, wait in enumerate(view.vl_xmit_wait):
            got = reported(text, "ibpool_fabric_port_vl_transmit_wait_total", view, vl=str(vl))
            assert got == saturate(wait, 16), (view.node_desc, view.port, vl)
            nonzero += wait > 0
    return nonzero


def port_index(model: ClusterModel, desc: str, number: int) -> int:
    return next(p.index for p in model.topology.ports if (p.node_desc, p.number) == (desc, number))


def test_pushed_counters_and_link_states_come_back_through_the_fabric_exporter(
    model: ClusterModel, fabric: IbsimFabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert fabric.node_guid("leaf001") == format_guid(model.topology.switch_guids[0][0])  # same GUIDs
    mirror = IbsimMirror(model, IbsimConsole(fabric.fifo, fabric.log_path))
    model.advance(0.0002)  # short enough that the 16-bit per-VL waits are not saturated yet
    model.add_symbol_errors(port_index(model, "leaf002", 3), 7)
    model.flap_link(model.uplink(0, 0))  # link_downed 1 on leaf001/5 and spine01/1
    assert mirror.push() > 0
    text = sweep(fabric, monkeypatch)
    assert assert_exporter_reports_the_model(text, model) >= 8
    uplink = next(
        v for v in model.fabric_view(include_hcas=False).ports if (v.node_desc, v.port) == ("leaf001", 5)
    )
    assert 0 < uplink.vl_xmit_wait[0] < 65535 and 0 < uplink.counters["port_xmit_wait"] < 2**32 - 1

    model.advance(60)  # waits saturate; a host cable goes down
    model.set_link(model.host_link("node0003"), up=False)
    fields = len(model.fabric_view(include_hcas=False).ports) * (17 + 7 + 8)
    assert 0 < mirror.push() < fields / 3  # only what changed: busy ports' data, waits; one Unlink
    text = sweep(fabric, monkeypatch)
    assert_exporter_reports_the_model(text, model)
    leaf_port_3 = next(
        v for v in model.fabric_view(include_hcas=False).ports if (v.node_desc, v.port) == ("leaf001", 3)
    )
    assert reported(text, "ibpool_fabric_port_state_id", leaf_port_3) == 1  # Down
    assert reported(text, "ibpool_fabric_link_info", leaf_port_3) is None
    assert reported(text, "ibpool_fabric_port_transmit_wait_total", uplink) == 2**32 - 1

    model.set_link(model.host_link("node0003"), up=True)
    mirror.push()
    text = sweep(fabric, monkeypatch)
    assert reported(text, "ibpool_fabric_port_physical_state_id", leaf_port_3) == 5  # LinkUp


def test_a_qos_change_on_opensm_changes_the_models_next_iterations(
    model: ClusterModel, fabric: IbsimFabric
) -> None:
    assert fabric.opensm is not None
    mirror = IbsimMirror(model, IbsimConsole(fabric.fifo, fabric.log_path))
    source = Smpquery(lambda argv: fabric.run_diag(argv).stdout, fabric.lid("leaf001"), 5)
    first = mirror.pull_qos(source)  # what OpenSM programmed from the recipe config
    assert first is not None and model.vl_weights()[:2] == (4, 64)
    before = {m.pool: m.iteration_seconds for m in model.job_metrics()}
    assert before["hi"] < before["lo"]  # hi's VL1 (64) beats lo's VL0 (4) on the shared uplink

    fabric.opensm.write_config({"qos_vlarb_low": "0:200,1:16,2:32,3:16,4:8,5:4,6:2,7:1"})
    fabric.opensm.reload()  # what the hooks do: edit opensm.conf, SIGHUP
    assert wait_for(lambda: mirror.pull_qos(source) is not None, timeout=20)  # once OpenSM reprogrammed
    assert model.vl_weights()[:2] == (204, 16)
    after = {m.pool: m.iteration_seconds for m in model.job_metrics()}
    assert after["lo"] < before["lo"] and after["hi"] > before["hi"] and after["lo"] < after["hi"]
    conf = OpenSMConf(fabric.opensm.conf_path).read()
    assert (conf.vlarb_high, conf.vlarb_low) == (model.qos().vlarb_high, model.qos().vlarb_low)
    model.advance(60)  # the model runs on with the new shares
    assert {m.pool: m.iteration_seconds for m in model.job_metrics()} == after
