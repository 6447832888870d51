"""`ibpool proposals` + `ibpool apply` against ibsim and a real OpenSM, the way the issue checks it.

A proposal file is submitted, approved by another person and applied with `ibpool apply ID --yes
--config FILE`; the weights are read back with our own `smpquery vlarb` call. A second apply changes
nothing (files, mtimes and OpenSM's log untouched), a stale proposal is refused and audited, and an apply
killed with -9 mid-way is completed or rolled back by `ibpool apply --recover`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.scheduler_hooks.apply.flow import Flow
from tests.scheduler_hooks.opensm.lab import BASELINE, FILES, Lab, missing

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(missing()), reason=f"not installed: {', '.join(missing())}"),
]
LOW = "opensm.vlarb_low"
NEW_LOW = "1:128,2:32,3:16,4:8,5:4,6:2,7:200"
SL2VL = "1,1,2,2,3,3,4,4,5,5,6,6,7,7,0,0"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    running = Lab(tmp_path_factory.mktemp("apply-lab")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def flow(
    lab: Lab, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Flow:
    """The lab at its baseline, an apply config for it, and $IBPOOL_DB in a fresh directory."""
    lab.reset(tmp_path / "reset-state")
    section = lab.config_mapping(Path("/unused"))
    del section["state_dir"]  # default: <state_dir>/opensm
    config = tmp_path / "apply.yaml"
    config.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"), "opensm": section}))
    monkeypatch.setenv("IBPOOL_DB", str(tmp_path / "ibpool.db"))
    return Flow(tmp_path, capsys, config)


def tables(output: str) -> list[dict[str, str]]:
    """VL -> weight (as printed: upper-case hex) of each table of a raw `smpquery vlarb`, low first."""
    vls = re.findall(r"^VL\s*:\s*(\|.*)$", output, re.M)
    ws = re.findall(r"^WEIGHT:\s*(\|.*)$", output, re.M)
    out = []
    for vl_row, weight_row in zip(vls, ws, strict=True):
        pairs = zip(vl_row.strip("|").split("|"), weight_row.strip("|").split("|"), strict=True)
        out.append({vl.strip(): w.strip() for vl, w in pairs if w.strip() != "0x0"})
    return out


def test_vl_weights_applied_read_back_idempotent_and_stale_refused(lab: Lab, flow: Flow) -> None:
    pid = flow.submit_and_approve(flow.proposal_file("set_vl_weights", [(LOW, BASELINE[LOW], NEW_LOW)]))
    with lab.frozen():  # OpenSM stopped: a SIGHUP would stay pending (lab.pending_signals)
        snapshot = lab.snapshot()
        code, out, err = flow.apply(pid)  # dry run
        assert lab.snapshot() == snapshot and lab.pending_signals() == set()
    assert code == 0, err
    assert f"    {LOW} [opensm] live matches before" in out and "  opensm would:" in out
    assert flow.history(pid)[-1][1] == "approved" and flow.steps(pid) == []

    since = lab.log_end()
    code, out, err = flow.apply(pid, "--yes")
    assert code == 0, err
    assert out.startswith(f"{pid}  applied: applied and verified (opensm applied)")
    leaf1, node5 = lab.fabric.lid("leaf1"), lab.fabric.lid("node5")
    for lid, port in ((leaf1, 4), (node5, 1)):
        low, high = tables(lab.smp("smpquery", "vlarb", str(lid), str(port)))
        assert low == {"0x1": "0x80", "0x2": "0x20", "0x3": "0x10", "0x4": "0x8", "0x5": "0x4"} | {
            "0x6": "0x2",
            "0x7": "0xC8",  # upper-case hex, as smpquery prints it
        }, (lid, low)
        assert high == {"0x0": "0x4"}
    assert flow.steps(pid) == [
        "apply.start",
        "apply.begin",
        "opensm.planned",
        "opensm.file_written",
        "opensm.files_written",
        "opensm.signalled",
        "opensm.verified",
        "apply.done",
    ]
    assert flow.history(pid)[-2:] == [("approved", "applying", "ok"), ("applying", "applied", "ok")]

    lab.wait_for_sweep_end(since)  # the re-read the apply asked for is over

    # From here on nothing may write OpenSM's files or signal it. It stays stopped, so a SIGHUP would stay
    # pending (lab.pending_signals) and its log cannot grow behind the test's back.
    with lab.frozen():
        snapshot = lab.snapshot()
        code, out, err = flow.apply(pid, "--yes")
        assert (code, out.strip()) == (0, f"{pid}  already_applied: already applied; nothing changed"), err
        assert lab.snapshot() == snapshot  # opensm.conf mtime and OpenSM's log unchanged

        # Same after, other content (a new id): the targets already show it, nothing is touched.
        same = flow.proposal_file("set_vl_weights", [(LOW, BASELINE[LOW], NEW_LOW)], effect="again")
        again = flow.submit_and_approve(same)
        code, out, err = flow.apply(again, "--yes")
        assert code == 0 and "in_effect: every target already showed after" in out, err
        assert lab.snapshot() == snapshot and flow.steps(again) == ["apply.in_effect"]

        # Written against the baseline, which is gone: stale.
        stale = flow.submit_and_approve(
            flow.proposal_file("set_vl_weights", [(LOW, BASELINE[LOW], "1:10,2:10")])
        )
        code, out, err = flow.apply(stale, "--yes")
        assert code == 1
        assert f"refused: stale: {LOW} is '1:128,2:32,3:16,4:8,5:4,6:2,7:200' live, neither before" in err
        last = flow.history(stale)[-1]
        assert last == ("approved", "approved", "refused")
        with flow.store() as store:
            assert store.audit(stale)[-1].detail.startswith(f"refused applying: stale: {LOW}")
            assert store.get(stale).state == "approved"
        assert lab.snapshot() == snapshot and lab.pending_signals() == set()


def test_a_malformed_value_is_refused_with_nothing_pushed(lab: Lab, flow: Flow) -> None:
    # Valid for the proposal format, not for this fabric: VL 9 is not below qos_max_vls 8.
    pid = flow.submit_and_approve(flow.proposal_file("set_vl_weights", [(LOW, BASELINE[LOW], "1:64,9:5")]))
    with lab.frozen():  # OpenSM stopped: a SIGHUP would stay pending (lab.pending_signals)
        snapshot = lab.snapshot()
        code, _, err = flow.apply(pid, "--yes")
        assert lab.snapshot() == snapshot and lab.pending_signals() == set()
    assert code == 1 and "opensm.vlarb_low: entry 2: VL 9 is not below qos_max_vls 8" in err
    assert flow.steps(pid) == []


@pytest.mark.parametrize(
    ("step", "result", "sl"),
    [("opensm.files_written", "applied", "0x5"), ("opensm.file_written", "rolled_back", "0x1")],
)
def test_killed_mid_way_then_recovered(lab: Lab, flow: Flow, step: str, result: str, sl: str) -> None:
    changes = [
        ("opensm.sl2vl", BASELINE["opensm.sl2vl"], SL2VL),
        ("opensm.port_group.training.sl", "1", "5"),
    ]
    pid = flow.submit_and_approve(flow.proposal_file("set_port_group", changes))
    flow.crash(step, 1, pid, "--yes")
    assert flow.history(pid)[-1] == ("approved", "applying", "ok")
    assert flow.steps(pid)[-1] == step

    code, out, err = flow.apply("--recover")
    assert code == 0, err
    assert out.startswith(f"{pid}  recovered: {result}")
    node1, node2 = str(lab.fabric.lid("node1")), str(lab.fabric.lid("node2"))
    path = lab.smp("saquery", "-p", "--src-to-dst", f"{node1}:{node2}")
    assert re.search(rf"^\s*sl\.+{sl}$", path, re.M), path
    if result == "applied":
        assert flow.history(pid)[-1] == ("applying", "applied", "ok")
        rows = re.findall(
            r"^ports: in\s+\d+, out\s+1:\s*(\|.*\|)$", lab.smp("smpquery", "sl2vl", "2", "1"), re.M
        )
        assert rows and set(rows) == {"| 1| 1| 2| 2| 3| 3| 4| 4| 5| 5| 6| 6| 7| 7| 0| 0|"}
    else:
        assert flow.history(pid)[-2:] == [("applying", "failed", "ok"), ("failed", "rolled_back", "ok")]
        for name in FILES[:2]:
            assert (lab.osm_dir / name).read_bytes() == lab.baseline[name]
    code, out, _ = flow.proposals("show", pid)
    shown = json.loads(out)
    steps = [s["step"] for s in shown["steps"]]
    assert steps[: steps.index(step) + 1][:3] == ["apply.start", "apply.begin", "opensm.planned"]
    assert "opensm.recovering" in steps and steps[-1] in ("apply.done", "apply.rollback_end")
    assert [a["to_state"] for a in shown["audit"]][-1] == result
    assert flow.apply("--recover")[1] == "nothing to recover\n"
