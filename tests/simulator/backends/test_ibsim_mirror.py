"""IbsimMirror against a recording console: only changed values, one batch, link states, QoS pull."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from simulator.backends.errors import ConsoleError
from simulator.backends.ibsim_counters import saturate
from simulator.backends.ibsim_mirror import IbsimMirror
from simulator.backends.qos_read import QosTables
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec

_SET = re.compile(r'^PerformanceSet "([^"]+)"\[(\d+)\] (\w+)\.(\w+)=(\d+)$')


class Recorder:
    """A console that answers like ibsim 0.10 and remembers every batch and every field's value."""

    def __init__(self, refuse: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.held: dict[tuple[str, int, str, str], int] = {}
        self.refuse = refuse

    def run(self, commands: Sequence[str]) -> str:
        self.batches.append(list(commands))
        out = []
        for command in commands:
            match = _SET.match(command)
            if self.refuse and self.refuse in command:
                out.append(f"# field {self.refuse} cannot be found in attribute PortCounters")
            elif match:
                desc, port, attribute, field, value = match.groups()
                self.held[(desc, int(port), attribute, field)] = int(value)
                out.append(f"{desc}[{port}] {attribute}.{field} has been set to {value}")
        return "\n".join(out)


def port(model: ClusterModel, desc: str, number: int) -> int:
    """The model's index of port `number` of `desc`."""
    return next(p.index for p in model.topology.ports if (p.node_desc, p.number) == (desc, number))


def congested() -> ClusterModel:
    model = ClusterModel(shared_uplink_spec(vlarb_low=((0, 32), (1, 224))))
    model.submit(chatty("hi"))
    model.submit(chatty("lo"))
    return model


def test_first_push_sends_nonzero_values_in_one_batch_and_ibsim_holds_the_model() -> None:
    model, console = congested(), Recorder()
    mirror = IbsimMirror(model, console)
    model.advance(0.0002)
    model.add_symbol_errors(port(model, "leaf002", 5), 3)
    count = mirror.push()
    assert len(console.batches) == 1 and count == len(console.batches[0]) > 0
    assert all(" PortCounters" in c or "Extended" in c or "VLXmitWait" in c for c in console.batches[0])
    for view in model.fabric_view(include_hcas=False).ports:
        key = (view.node_desc, view.port)
        assert console.held.get((*key, "PortCounters", "PortXmitWait"), 0) == view.counters["port_xmit_wait"]
        assert (
            console.held.get((*key, "PortCounters", "SymbolErrorCounter"), 0) == view.counters["symbol_error"]
        )
        assert (
            console.held.get((*key, "PortCountersExtended", "PortXmitData"), 0)
            == view.counters["port_xmit_data"]
        )
        for vl, wait in enumerate(view.vl_xmit_wait):
            field = f"PortVLXmitWaitCounters{vl}"
            assert console.held.get((*key, "PortVLXmitWaitCounters", field), 0) == saturate(wait, 16)
    assert console.held[("leaf002", 5, "PortCounters", "SymbolErrorCounter")] == 3
    assert not any('"node0' in c for c in console.batches[0])  # switch ports only


def test_only_changed_values_go_out() -> None:
    model, console = congested(), Recorder()
    mirror = IbsimMirror(model, console)
    model.advance(0.0002)
    mirror.push()
    assert mirror.push() == 0 and len(console.batches) == 1  # nothing changed: nothing written
    model.add_symbol_errors(port(model, "leaf001", 5), 1)
    assert mirror.push() == 1
    assert console.batches[-1] == ['PerformanceSet "leaf001"[5] PortCounters.SymbolErrorCounter=1']
    model.advance(60)
    second = console.batches[-1] if mirror.push() else []
    assert any("PortXmitWait=4294967295" in c for c in second)  # saturated 32-bit wait
    assert any("PortVLXmitWaitCounters1=65535" in c for c in second)  # 16-bit per-VL field
    assert not any("SymbolErrorCounter" in c for c in second)


def test_link_state_is_mirrored_on_the_switch_end_before_counters() -> None:
    model, console = congested(), Recorder()
    mirror = IbsimMirror(model, console, hca_ports=True)
    model.set_link(model.host_link("node0002"), up=False)
    model.set_link(model.uplink(1, 0), up=False)
    mirror.push()
    batch = console.batches[-1]
    assert batch[:2] == ['Unlink "leaf001"[2]', 'Unlink "leaf002"[5]']
    assert 'PerformanceSet "leaf001"[2] PortCounters.LinkDownedCounter=1' in batch
    assert 'PerformanceSet "node0002 mlx5_0"[1] PortCounters.LinkDownedCounter=1' in batch  # HCA ports asked
    model.set_link(model.host_link("node0002"), up=True)
    mirror.push()
    assert console.batches[-1] == ['ReLink "leaf001"[2]']


def test_a_refused_push_raises_and_is_sent_again() -> None:
    model, console = congested(), Recorder(refuse="SymbolErrorCounter")
    mirror = IbsimMirror(model, console)
    model.add_symbol_errors(port(model, "leaf001", 5), 2)
    with pytest.raises(ConsoleError, match="cannot be found"):
        mirror.push()
    console.refuse = None
    assert mirror.push() == 1  # not remembered as sent


def test_a_mirror_that_cannot_assume_zeros_sends_everything_once() -> None:
    model, console = congested(), Recorder()
    mirror = IbsimMirror(model, console, fresh=False)
    switch_ports = len(model.fabric_view(include_hcas=False).ports)
    assert mirror.push() == switch_ports * (17 + 7 + 8)
    assert mirror.push() == 0


def test_pull_qos_applies_the_fabrics_tables() -> None:
    model = congested()

    class Source:
        def read(self) -> QosTables:
            return QosTables(((0, 4),), ((1, 64),))

    mirror = IbsimMirror(model, Recorder())
    before = {m.pool: m.iteration_seconds for m in model.job_metrics()}
    change = mirror.pull_qos(Source())
    assert change is not None and model.vl_weights()[:2] == (4, 64)
    after = {m.pool: m.iteration_seconds for m in model.job_metrics()}
    assert after["lo"] > before["lo"] and after["hi"] < before["hi"]
    assert mirror.pull_qos(Source()) is None
