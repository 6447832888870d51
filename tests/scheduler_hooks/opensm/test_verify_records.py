"""The verification poll, the diagnostics' argument checks, durable files and apply records."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from scheduler_hooks.errors import ApplyFailedError, CommandFailedError, RecoveryFailedError
from scheduler_hooks.opensm import record as records
from scheduler_hooks.opensm.commands import Diag, Output, check_lid, check_port
from scheduler_hooks.opensm.config import DiagConfig
from scheduler_hooks.opensm.fabric import FabricReader, PortRef
from scheduler_hooks.opensm.files import atomic_write, sha256
from scheduler_hooks.opensm.model import Change
from scheduler_hooks.opensm.signalling import log_errors
from scheduler_hooks.opensm.targets import Kind, Target
from scheduler_hooks.opensm.verify import path_checks, path_pairs, pkey_checks, poll, table_checks

DATA = Path(__file__).parent / "data"


class ScriptedRunner:
    """Answers argv from a table; counts calls; the answer may change after N calls."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> Output:
        self.calls.append(tuple(argv))
        key = " ".join(argv[1:])
        queue = self.answers[key]
        text = queue.pop(0) if len(queue) > 1 else queue[0]
        if text.startswith("FAIL"):
            return Output(tuple(argv), 1, "", "ibwarn: mad_rpc failed", 0.0)
        return Output(tuple(argv), 0, text, "", 0.0)


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """smpquery, saquery and ibnetdiscover as executable files the scripted runner answers for."""
    bin_dir = tmp_path_factory.mktemp("bin")
    paths = {}
    for name in ("smpquery", "saquery", "ibnetdiscover"):
        path = bin_dir / name
        path.write_text("#!/bin/sh\nexit 99\n")
        path.chmod(0o755)
        paths[name] = str(path)
    return paths


def reader(answers: dict[str, list[str]], programs: dict[str, str]) -> tuple[FabricReader, ScriptedRunner]:
    runner = ScriptedRunner(answers)
    config = DiagConfig(
        smpquery=programs["smpquery"], saquery=programs["saquery"], ibnetdiscover=programs["ibnetdiscover"]
    )
    return FabricReader(Diag(config, runner), concurrency=2), runner


def test_poll_waits_for_the_new_table_then_stops_asking(programs: dict[str, str]) -> None:
    old = (DATA / "smpquery_vlarb_hca.txt").read_text()
    new = old.replace(
        "|0x0 |0x40|0x20|0x10|0x8 |0x4 |0x2 |0x1 |", "|0x0 |0xC8|0xA |0x0 |0x0 |0x0 |0x0 |0x0 |"
    )
    fabric, runner = reader({"vlarb 5 1": [old, old, new], "vlarb 3 4": [new]}, programs)
    checks = table_checks(
        Target(Kind.VLARB_LOW), "1:200,2:10", [PortRef(5, 1, "node2"), PortRef(3, 4, "leaf1")]
    )
    result = poll(fabric, checks, timeout=5, interval=0.01)
    assert result.ok and result.rounds == 3 and result.checks == 2
    assert [c[-2:] for c in runner.calls].count(("3", "4")) == 1  # a check that held is not asked again


def test_poll_times_out_with_the_mismatching_ports(programs: dict[str, str]) -> None:
    fabric, _ = reader(
        {"vlarb 5 1": [(DATA / "smpquery_vlarb_hca.txt").read_text()], "pkeys 1 1": ["FAIL"]}, programs
    )
    checks = table_checks(Target(Kind.VLARB_HIGH), "0:9", [PortRef(5, 1, "node2")])
    checks += pkey_checks(Target(Kind.PARTITION_MEMBERS, "p"), 2, {PortRef(1, 1, "node1"): "full"})
    result = poll(fabric, checks, timeout=0.05, interval=0.01)
    assert not result.ok and [(m.where, m.expected, m.actual) for m in result.mismatches] == [
        ("node2[1] (lid 5)", "0:9", "0:4"),
        ("node1[1] (lid 1) pkey 0x0002", "full", "error: smpquery pkeys 1 1: exit 1: ibwarn: mad_rpc failed"),
    ]
    assert "2 of 2 checks failed" in result.describe()


def test_poll_stops_at_an_opensm_configuration_error(tmp_path: Path, programs: dict[str, str]) -> None:
    log = tmp_path / "osm.log"
    log.write_text("old line ERR AC04: before the signal\n")
    offset = log.stat().st_size
    with log.open("a") as out:
        out.write("Dec 02 0x01 -> parse_part_conf: PARSE ERROR: line 6: no partition definition found\n")
    fabric, runner = reader(
        {"saquery -p --src-to-dst 1:5": [(DATA / "saquery_path_sl3.txt").read_text()]}, programs
    )
    checks = path_checks(Target(Kind.GROUP_SL, "p"), "4", [(PortRef(1, 1), PortRef(5, 1))])
    result = poll(fabric, checks, 5, 0.01, lambda: log_errors(log, offset))
    assert not result.ok and result.rounds == 1 and runner.calls == []
    assert "PARSE ERROR: line 6" in result.mismatches[0].actual
    assert log_errors(log, 0) == "old line ERR AC04: before the signal"
    assert log_errors(log, 10**9) is None  # rotated: nothing to say


def test_path_pairs_and_argument_checks(programs: dict[str, str]) -> None:
    ports = [PortRef(1, 1), PortRef(5, 1), PortRef(6, 1)]
    assert path_pairs(ports, 3) == [(ports[0], ports[1]), (ports[0], ports[2]), (ports[1], ports[0])]
    assert path_pairs(ports[:1], 3) == []
    assert check_lid(0xBFFF) == 0xBFFF and check_port(0) == 0
    for bad_lid in (0, 0xC000, True, "5"):
        with pytest.raises(ValueError):
            check_lid(bad_lid)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        check_port(255)
    diag = Diag(
        DiagConfig(smpquery=programs["smpquery"], ca="mlx5_0", ca_port=1, mad_timeout_ms=100),
        ScriptedRunner({}),
    )
    with pytest.raises(ValueError, match="not one of"):
        diag.smpquery("portinfo; reboot", 1, 1)
    runner = ScriptedRunner({"-C mlx5_0 -P 1 -t 100 vlarb 1 1": ["FAIL"]})
    diag = Diag(DiagConfig(smpquery=programs["smpquery"], ca="mlx5_0", ca_port=1, mad_timeout_ms=100), runner)
    with pytest.raises(CommandFailedError, match="exit 1"):
        diag.smpquery("vlarb", 1, 1)


def test_default_runner_times_out_and_reports_missing_programs(tmp_path: Path) -> None:
    diag = Diag(DiagConfig(command_timeout=0.2, workdir=tmp_path))
    with pytest.raises(CommandFailedError, match=r"no answer within 0\.2 s"):
        diag.run(["/bin/sleep", "5"])
    with pytest.raises(CommandFailedError, match="cannot start"):
        diag.run([str(tmp_path / "missing")])
    assert diag.run(["/bin/sh", "-c", "echo ${LD_PRELOAD-unset}"]) == "unset\n"  # no preload configured


def test_atomic_write_keeps_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "opensm.conf"
    path.write_text("old\n")
    path.chmod(0o640)
    atomic_write(path, b"new\n")
    assert path.read_text() == "new\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    atomic_write(tmp_path / "fresh.conf", b"x")
    assert stat.S_IMODE((tmp_path / "fresh.conf").stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.conf", "opensm.conf"]
    assert sha256(tmp_path / "none") is None


def test_records_round_trip_and_lock(tmp_path: Path) -> None:
    file = records.FileChange("config", "/etc/opensm/opensm.conf", None, None, "ab")
    record = records.ApplyRecord(
        "id1", 1.0, str(tmp_path / "id1"), (Change("opensm.sl2vl", None, "0"),), (file,), 7, records.PLANNED
    )
    (tmp_path / "id1").mkdir()
    record = record.advanced(records.FILES_WRITTEN, {"files": 1})
    records.save(record)
    assert records.load(tmp_path / "id1") == record and not record.finished and not record.signalled
    assert records.unfinished(tmp_path) == [record]
    records.save(record.advanced(records.VERIFIED))
    assert records.unfinished(tmp_path) == []
    with records.locked(tmp_path), pytest.raises(ApplyFailedError, match="holds"), records.locked(tmp_path):
        pass
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "record.json").write_text("{")
    with pytest.raises(RecoveryFailedError, match="cannot read apply record"):
        records.unfinished(tmp_path)
    assert os.path.exists(tmp_path / "lock")
