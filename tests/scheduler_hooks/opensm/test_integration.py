"""The OpenSM adapter against ibsim + a real OpenSM with QoS on (the RECIPES.md settings).

One fabric for the module; every test starts from the baseline files (`Lab.reset`). Values are read
back with smpquery/saquery run by the test itself, not only through the adapter.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_hooks.errors import ChangeRejectedError, SignalFailedError
from scheduler_hooks.opensm import Change, OpenSMAdapter, OpenSMConfig
from scheduler_hooks.opensm import record as records
from tests.scheduler_hooks.opensm.lab import BASELINE, FILES, Lab, missing

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(missing()), reason=f"not installed: {', '.join(missing())}"),
]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One ibsim + OpenSM for the module."""
    running = Lab(tmp_path_factory.mktemp("opensm-lab")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def state_dir(lab: Lab, tmp_path: Path) -> Path:
    """A fresh state directory, with the lab back at its baseline."""
    lab.reset(tmp_path / "reset-state")
    return tmp_path / "state"


@pytest.fixture
def steps() -> list[str]:
    """The steps the adapter reported, in order."""
    return []


@pytest.fixture
def adapter(lab: Lab, state_dir: Path, steps: list[str]) -> Iterator[OpenSMAdapter]:
    """An adapter that records every step into `steps`."""
    with lab.adapter(state_dir, on_step=lambda name, detail: steps.append(name)) as built:
        yield built


def change(target: str, after: str) -> Change:
    """A change from the baseline value."""
    return Change(target, BASELINE.get(target), after)


def weights(output: str) -> list[tuple[str, str]]:
    """The (VL row, WEIGHT row) pairs of a raw `smpquery vlarb` output (low table first)."""
    vls = re.findall(r"^VL\s*:\s*(\|.*)$", output, re.M)
    ws = re.findall(r"^WEIGHT:\s*(\|.*)$", output, re.M)
    return list(zip(vls, ws, strict=True))


def test_reads_the_baseline_from_files_and_fabric(adapter: OpenSMAdapter) -> None:
    for target, value in BASELINE.items():
        assert adapter.read(target) == value, target
    sources = adapter.read_sources("opensm.vlarb_low")
    assert sources.file == BASELINE["opensm.vlarb_low"] and sources.fabric_consistent
    assert len(sources.fabric_by_port) == 10 + 6  # linked switch ports + CA ports
    assert adapter.stale([change(t, v) for t, v in BASELINE.items()]) == []


def test_vl_weights_reach_switch_and_hca_ports(lab: Lab, adapter: OpenSMAdapter, steps: list[str]) -> None:
    changes = [
        change("opensm.vlarb_low", "0:0,1:128,2:64,3:32,4:16,5:8,6:4,7:200"),
        change("opensm.vlarb_high", "0:16,1:8"),
    ]
    assert adapter.validate(changes) == []
    record = adapter.apply(changes)
    assert record.phase == records.SIGNALLED and [f.role for f in record.files] == ["config"]
    result = adapter.verify(changes, record=record)
    assert result.ok, result.describe()
    assert steps == ["planned", "file_written", "files_written", "signalled", "verified"]
    conf = (lab.osm_dir / "opensm.conf").read_text()
    assert "qos_vlarb_low 0:0,1:128,2:64,3:32,4:16,5:8,6:4,7:200\n" in conf
    backup = Path(record.files[0].backup or "")
    assert backup.read_bytes() == lab.baseline["opensm.conf"]
    leaf1, node5 = lab.fabric.lid("leaf1"), lab.fabric.lid("node5")
    for lid, port in ((leaf1, 4), (node5, 1)):  # a switch uplink and an HCA port
        (low_vl, low_w), (high_vl, high_w) = weights(lab.smp("smpquery", "vlarb", str(lid), str(port)))
        assert low_vl.startswith("|0x0 |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |")
        assert low_w.startswith("|0x0 |0x80|0x40|0x20|0x10|0x8 |0x4 |0xC8|")  # upper-case hex
        assert high_vl.startswith("|0x0 |0x1 |") and high_w.startswith("|0x10|0x8 |0x0 |")
    assert adapter.read("opensm.vlarb_low") == "1:128,2:64,3:32,4:16,5:8,6:4,7:200"
    assert adapter.read("opensm.vlarb_high") == "0:16,1:8"


def test_applying_again_writes_and_signals_nothing(lab: Lab, adapter: OpenSMAdapter) -> None:
    changes = [change("opensm.vlarb_low", "1:10,2:20")]
    since = lab.log_end()
    first = adapter.apply(changes)
    assert adapter.verify(changes, record=first).ok
    lab.wait_for_sweep_end(since)  # the re-read the first apply asked for is over
    with lab.frozen():  # a SIGHUP now stays pending instead of being handled
        before = lab.snapshot()
        again = adapter.apply(changes)
        assert again.phase == records.NOOP and again.files == () and again.directory == ""
        assert lab.snapshot() == before and lab.pending_signals() == set()
    # Already at `after`: not stale; with allow_after=False the old `before` no longer matches.
    assert adapter.stale(changes) == []
    assert adapter.stale(changes, allow_after=False) == ["opensm.vlarb_low"]


def test_sl2vl_change(lab: Lab, adapter: OpenSMAdapter) -> None:
    sl2vl = "1,1,2,2,3,3,4,4,5,5,6,6,7,7,0,0"
    changes = [change("opensm.sl2vl", sl2vl)]
    record, result = adapter.apply_verified(changes)
    assert result.ok and record.phase == records.VERIFIED, result.describe()
    output = lab.smp("smpquery", "sl2vl", str(lab.fabric.lid("leaf2")), "1")
    rows = re.findall(r"^ports: in\s+\d+, out\s+1:\s*(\|.*\|)$", output, re.M)
    assert len(rows) == 7 and set(rows) == {"| 1| 1| 2| 2| 3| 3| 4| 4| 5| 5| 6| 6| 7| 7| 0| 0|"}
    assert adapter.read("opensm.sl2vl") == sl2vl


def test_port_group_sl_change_reads_back_with_saquery(lab: Lab, adapter: OpenSMAdapter) -> None:
    changes = [change("opensm.port_group.training.sl", "5")]
    record, result = adapter.apply_verified(changes)
    assert result.ok, result.describe()
    assert [f.role for f in record.files] == ["policy"]
    node1, node2, node4 = (str(lab.fabric.lid(n)) for n in ("node1", "node2", "node4"))
    assert re.search(r"^\s*sl\.+0x5$", lab.smp("saquery", "-p", "--src-to-dst", f"{node1}:{node2}"), re.M)
    assert re.search(r"^\s*sl\.+0x0$", lab.smp("saquery", "-p", "--src-to-dst", f"{node1}:{node4}"), re.M)
    policy = (lab.osm_dir / "qos-policy.conf").read_text()
    assert "name: training-level\n        sl: 5\n" in policy  # edited in place: only training uses it
    assert policy.startswith("# ibpool test policy\n")
    assert adapter.read("opensm.port_group.training.sl") == "5"
    assert adapter.read("opensm.port_group.inference.sl") == "2"


def test_moving_a_node_updates_partitions_and_port_groups(lab: Lab, adapter: OpenSMAdapter) -> None:
    changes = [
        change("opensm.partition.training.members", "node1,node2"),
        change("opensm.partition.inference.members", "node3,node4,node5,node6"),
        change("opensm.port_group.training.members", "node1,node2"),
        change("opensm.port_group.inference.members", "node3,node4,node5,node6"),
    ]
    record, result = adapter.apply_verified(changes)
    assert result.ok, result.describe()
    assert sorted(f.role for f in record.files) == ["partitions", "policy"]
    pkeys = lab.smp("smpquery", "pkeys", str(lab.fabric.lid("node3")), "1").split()
    assert "0x8003" in pkeys and "0x8002" not in pkeys and "0x0002" not in pkeys
    node3, node4 = str(lab.fabric.lid("node3")), str(lab.fabric.lid("node4"))
    assert re.search(r"^\s*sl\.+0x2$", lab.smp("saquery", "-p", "--src-to-dst", f"{node3}:{node4}"), re.M)
    assert adapter.read("opensm.partition.inference.members") == "node3,node4,node5,node6"
    assert adapter.read("opensm.partition.training.members") == "node1,node2"
    text = (lab.osm_dir / "partitions.conf").read_text()
    assert text.startswith("# ibpool test partitions\nDefault=0x7fff, ipoib : ALL=full ;\n")
    assert lab.opensm is not None and "PARSE ERROR" not in lab.opensm.log_text()


def test_malformed_weight_is_refused_with_nothing_written_or_signalled(
    lab: Lab, adapter: OpenSMAdapter, state_dir: Path, steps: list[str]
) -> None:
    # OpenSM stopped throughout: a SIGHUP would stay pending, and nothing but the adapter can write.
    with lab.frozen():
        before = lab.snapshot()
        bad = [change("opensm.vlarb_high", "0:255,3:abc,7:300,16:5,0:1")]
        with pytest.raises(ChangeRejectedError) as caught:
            adapter.apply(bad)
        assert caught.value.problems == [
            "opensm.vlarb_high: entry 2 '3:abc' is not VL:weight (decimal numbers)",
            "opensm.vlarb_high: entry 3: weight 300 is out of range 0-255",
            "opensm.vlarb_high: entry 4: VL 16 is out of range 0-14",
            "opensm.vlarb_high: entry 5: VL 0 appears twice",
        ]
        problems = adapter.validate(
            [change("opensm.sl2vl", "0,1,2,9"), change("opensm.port_group.nosuch.sl", "16")]
        )
        assert [str(p) for p in problems] == [
            "opensm.sl2vl: 4 entries, need 16 (one VL per SL)",
            "opensm.sl2vl: SL 3: VL 9 is not below qos_max_vls 8",
            "opensm.port_group.nosuch.sl: SL '16' is not a decimal number 0-15",
            "opensm.port_group.nosuch.sl: no port-group named 'nosuch' in the QoS policy file",
        ]
        members = adapter.validate([change("opensm.partition.training.members", "node1,node99,0x1234")])
        assert [p.message for p in members] == [
            "node 'node99' is not known (no CA port with that name)",
            "port GUID 0x0000000000001234 is not a CA port on the fabric",
        ]
        assert lab.snapshot() == before  # contents, mtimes, and no new OpenSM log or stdout output
        assert lab.pending_signals() == set()  # and no signal on its way
    assert not state_dir.exists() or not any(p.is_dir() for p in state_dir.iterdir())
    assert steps == ["refused"]


def test_wrong_pid_refuses_before_writing(lab: Lab, state_dir: Path, tmp_path: Path) -> None:
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        mapping = lab.config_mapping(state_dir)
        (tmp_path / "decoy.pid").write_text(str(decoy.pid))
        mapping["pid_file"] = str(tmp_path / "decoy.pid")
        with lab.frozen():
            before = lab.snapshot()
            wrong = OpenSMAdapter(OpenSMConfig.from_mapping(mapping))
            with wrong, pytest.raises(SignalFailedError, match="not 'opensm'"):
                wrong.apply([change("opensm.vlarb_low", "1:1")])
            assert lab.snapshot() == before and lab.pending_signals() == set()
    finally:
        decoy.kill()
        decoy.wait()


def test_verification_mismatch_rolls_back(lab: Lab, adapter: OpenSMAdapter, steps: list[str]) -> None:
    """OpenSM is stopped (SIGSTOP): the signal is sent, nothing changes, verify fails, rollback restores."""
    changes = [change("opensm.vlarb_low", "1:99"), change("opensm.partition.training.members", "node1")]
    with lab.frozen():
        record, result = adapter.apply_verified(changes, timeout=1.0)
        assert lab.pending_signals() == {signal.SIGHUP}  # sent (apply and rollback: one pending)
        since = lab.log_end()
    assert not result.ok
    assert {m.target for m in result.mismatches} == {"opensm.vlarb_low", "opensm.partition.training.members"}
    assert record.phase == records.ROLLED_BACK
    for name in FILES:
        assert (lab.osm_dir / name).read_bytes() == lab.baseline[name]
    assert steps[-4:] == [
        "verify_failed",
        "files_restored",
        "rollback_signalled",
        "rolled_back",
    ]
    lab.wait_for_sweep_end(since)  # OpenSM handled the pending SIGHUP, with the restored files
    assert adapter.read("opensm.vlarb_low") == BASELINE["opensm.vlarb_low"]


def _crash(
    lab: Lab, state_dir: Path, tmp_path: Path, changes: list[Change], *, step: str, nth: int = 1
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(lab.config_mapping(state_dir)))
    (tmp_path / "changes.json").write_text(json.dumps([c.__dict__ for c in changes]))
    argv = [sys.executable, "-m", "tests.scheduler_hooks.opensm.crash_apply"]
    argv += [str(tmp_path / "config.json"), str(tmp_path / "changes.json"), step, str(nth)]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def test_crash_after_files_written_is_completed_by_recover(
    lab: Lab, adapter: OpenSMAdapter, state_dir: Path, tmp_path: Path
) -> None:
    changes = [change("opensm.vlarb_low", "1:77,2:33"), change("opensm.port_group.inference.sl", "6")]
    _crash(lab, state_dir, tmp_path, changes, step="files_written")
    (unfinished,) = records.unfinished(state_dir)
    assert unfinished.phase == records.FILES_WRITTEN and not unfinished.signalled
    assert adapter.read_sources("opensm.vlarb_low").file == "1:77,2:33"  # written ...
    assert adapter.read("opensm.vlarb_low") == BASELINE["opensm.vlarb_low"]  # ... but not signalled
    (outcome,) = adapter.recover(state_dir)
    assert outcome.action == "completed" and outcome.verify.ok, outcome.verify.describe()
    assert outcome.record.phase == records.VERIFIED
    assert adapter.read("opensm.vlarb_low") == "1:77,2:33"
    assert adapter.read("opensm.port_group.inference.sl") == "6"
    assert records.unfinished(state_dir) == [] and adapter.recover(state_dir) == []


def test_crash_between_two_file_writes_is_rolled_back_by_recover(
    lab: Lab, adapter: OpenSMAdapter, state_dir: Path, tmp_path: Path
) -> None:
    changes = [change("opensm.vlarb_low", "1:5"), change("opensm.partition.training.members", "node1,node2")]
    _crash(lab, state_dir, tmp_path, changes, step="file_written", nth=1)
    (unfinished,) = records.unfinished(state_dir)
    assert unfinished.phase == records.PLANNED
    assert (lab.osm_dir / "opensm.conf").read_bytes() != lab.baseline["opensm.conf"]  # half applied
    assert (lab.osm_dir / "partitions.conf").read_bytes() == lab.baseline["partitions.conf"]
    (outcome,) = adapter.recover(Path(unfinished.directory))
    assert outcome.action == "rolled_back" and outcome.verify.ok, outcome.verify.describe()
    for name in FILES:
        assert (lab.osm_dir / name).read_bytes() == lab.baseline[name]
    assert adapter.read("opensm.vlarb_low") == BASELINE["opensm.vlarb_low"]
