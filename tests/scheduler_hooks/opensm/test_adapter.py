"""The adapter's apply, idempotence, refusal, rollback and recovery against a fake OpenSM (no ibsim)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from scheduler_hooks.errors import (
    ApplyFailedError,
    ChangeRejectedError,
    LiveStateError,
    RecoveryFailedError,
    SignalFailedError,
)
from scheduler_hooks.opensm import Change, OpenSMAdapter, signalling
from scheduler_hooks.opensm import record as records
from scheduler_hooks.opensm.model import StepCallback
from tests.scheduler_hooks.opensm.fake_opensm import FakeOpenSM

WEIGHTS = Change("opensm.vlarb_low", "1:64,2:32", "1:10,2:20,3:30")
MOVE = [
    Change("opensm.partition.training.members", "node1,node2", "node1"),
    Change("opensm.partition.inference.members", "node3,node4", "node2,node3,node4"),
]


class CrashError(Exception):
    """Raised by an on_step hook to stop apply right after a step (the record stays as saved)."""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeOpenSM]:
    with FakeOpenSM(tmp_path / "osm") as running:
        yield running


@pytest.fixture
def steps() -> list[str]:
    return []


@pytest.fixture
def adapter(fake: FakeOpenSM, tmp_path: Path, steps: list[str]) -> Iterator[OpenSMAdapter]:
    with fake.adapter(tmp_path / "state", on_step=lambda name, detail: steps.append(name)) as built:
        yield built


def crash_after(step: str, nth: int = 1) -> StepCallback:
    seen = []

    def hook(name: str, detail: Mapping[str, object]) -> None:
        if name == step:
            seen.append(name)
            if len(seen) == nth:
                raise CrashError(step)

    return hook


def test_read_sources_and_stale(adapter: OpenSMAdapter) -> None:
    assert adapter.read("opensm.vlarb_low") == "1:64,2:32"
    assert adapter.read("opensm.partition.inference.members") == "node3,node4"
    assert adapter.read("opensm.port_group.training.sl") == "0"
    assert adapter.read("opensm.port_group.training.members") == "node1,node2"
    sources = adapter.read_sources("opensm.partition.training.members")
    assert sources.file == sources.fabric == "node1,node2"
    assert adapter.stale([WEIGHTS, *MOVE]) == []
    assert adapter.stale([Change("opensm.vlarb_low", "1:1", "1:2")]) == ["opensm.vlarb_low"]
    assert adapter.stale([Change("opensm.vlarb_low", "bogus", "1:2")]) == ["opensm.vlarb_low"]
    with pytest.raises(ChangeRejectedError, match="unknown OpenSM target"):
        adapter.read("opensm.nothing")


def test_apply_verify_then_apply_again_is_a_noop(
    adapter: OpenSMAdapter, fake: FakeOpenSM, steps: list[str], tmp_path: Path
) -> None:
    record, result = adapter.apply_verified([WEIGHTS, *MOVE])
    assert result.ok and record.phase == records.VERIFIED and fake.hups == 1
    assert steps == ["planned", "file_written", "file_written", "files_written", "signalled", "verified"]
    assert [f.role for f in record.files] == ["config", "partitions"]
    assert all(Path(f.backup or "").is_file() for f in record.files)
    assert adapter.read("opensm.vlarb_low") == "1:10,2:20,3:30"
    assert adapter.read("opensm.partition.inference.members") == "node2,node3,node4"
    mtimes = {p: p.stat().st_mtime_ns for p in fake.paths.values()}
    again, result = adapter.apply_verified([WEIGHTS, *MOVE])
    assert again.phase == records.NOOP and result.checks == 0 and fake.hups == 1
    assert adapter.rollback(again).verify.ok and fake.hups == 1  # nothing to undo
    assert {p: p.stat().st_mtime_ns for p in fake.paths.values()} == mtimes
    assert len([d for d in (tmp_path / "state").iterdir() if d.is_dir()]) == 1
    assert steps[-1] == "noop"


def test_files_already_written_but_not_in_effect_only_signals(
    adapter: OpenSMAdapter, fake: FakeOpenSM
) -> None:
    fake.paths["opensm.conf"].write_text(
        fake.paths["opensm.conf"].read_text().replace("1:64,2:32", "1:10,2:20,3:30")
    )
    record = adapter.apply([WEIGHTS])
    assert record.phase == records.SIGNALLED and record.files == () and fake.hups == 1
    assert adapter.verify([WEIGHTS], record=record).ok


def test_refused_change_writes_and_signals_nothing(
    adapter: OpenSMAdapter, fake: FakeOpenSM, tmp_path: Path
) -> None:
    before = fake.read()
    with pytest.raises(ChangeRejectedError) as caught:
        adapter.apply(
            [
                Change("opensm.vlarb_low", None, "1:300"),
                Change("opensm.partition.training.members", None, "node9"),
            ]
        )
    assert caught.value.problems == [
        "opensm.vlarb_low: entry 1: weight 300 is out of range 0-255",
        "opensm.partition.training.members: node 'node9' is not known (no CA port with that name)",
    ]
    assert fake.read() == before and fake.hups == 0
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["lock"]


def test_hung_opensm_fails_verification_and_rolls_back(
    adapter: OpenSMAdapter, fake: FakeOpenSM, steps: list[str]
) -> None:
    fake.deaf = True
    before = fake.read()
    record, result = adapter.apply_verified([WEIGHTS], timeout=0.2)
    assert not result.ok and result.mismatches[0].expected == "1:10,2:20,3:30"
    assert record.phase == records.ROLLED_BACK and fake.read() == before and fake.hups == 2
    assert steps[-4:] == ["verify_failed", "files_restored", "rollback_signalled", "rolled_back"]
    assert records.load(Path(record.directory)).phase == records.ROLLED_BACK


def test_recover_completes_after_files_written(fake: FakeOpenSM, tmp_path: Path) -> None:
    crashing = fake.adapter(tmp_path / "state", on_step=crash_after("files_written"))
    with crashing, pytest.raises(CrashError):
        crashing.apply([WEIGHTS, *MOVE])
    assert fake.hups == 0
    with fake.adapter(tmp_path / "state") as adapter:
        with pytest.raises(ApplyFailedError, match="run recover first"):
            adapter.apply([Change("opensm.vlarb_high", "0:4", "0:8")])
        (outcome,) = adapter.recover(tmp_path / "state")
        assert outcome.action == "completed" and outcome.verify.ok and fake.hups == 1
        assert adapter.read("opensm.partition.training.members") == "node1"
        assert adapter.recover(tmp_path / "state") == []


def test_recover_rolls_back_a_partial_write(fake: FakeOpenSM, tmp_path: Path) -> None:
    before = fake.read()
    crashing = fake.adapter(tmp_path / "state", on_step=crash_after("file_written"))
    with crashing, pytest.raises(CrashError):
        crashing.apply([WEIGHTS, *MOVE])
    assert fake.read().config != before.config and fake.read().partitions == before.partitions
    with fake.adapter(tmp_path / "state") as adapter:
        (outcome,) = adapter.recover(tmp_path / "state")
        assert outcome.action == "rolled_back" and outcome.verify.ok
        assert fake.read() == before and fake.hups == 1  # restored files were signalled


def test_rollback_refuses_to_clobber_a_later_edit(adapter: OpenSMAdapter, fake: FakeOpenSM) -> None:
    record = adapter.apply([WEIGHTS])
    fake.paths["opensm.conf"].write_text("# edited by hand\n")
    with pytest.raises(RecoveryFailedError, match="changed by someone else"):
        adapter.rollback(record)
    assert fake.paths["opensm.conf"].read_text() == "# edited by hand\n"


def test_failed_signal_after_writing_restores_the_files(
    adapter: OpenSMAdapter, fake: FakeOpenSM, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = fake.read()

    def dead(config: object) -> int:
        raise SignalFailedError("OpenSM (pid 1) is not running")

    monkeypatch.setattr(signalling, "reread", dead)
    with pytest.raises(SignalFailedError):
        adapter.apply([WEIGHTS])
    assert fake.read() == before
    (record_dir,) = [d for d in adapter.config.state_dir.iterdir() if d.is_dir()]
    assert records.load(record_dir).phase == records.ROLLED_BACK


def test_fabric_ports_that_disagree_make_read_fail(adapter: OpenSMAdapter, fake: FakeOpenSM) -> None:
    original = fake._vlarb
    fake._vlarb = lambda lid: original(lid).replace("0x40", "0x41") if lid == 5 else original(lid)  # type: ignore[method-assign]
    with pytest.raises(LiveStateError, match="ports disagree"):
        adapter.read("opensm.vlarb_low")
    assert adapter.stale([Change("opensm.vlarb_low", "1:64,2:32", "1:1")]) == ["opensm.vlarb_low"]


def test_both_membership_reads_back_as_full_on_the_fabric(adapter: OpenSMAdapter, fake: FakeOpenSM) -> None:
    change = Change("opensm.partition.training.members", "node1,node2", "node1=both,node2")
    record, result = adapter.apply_verified([change])
    assert result.ok and record.phase == records.VERIFIED
    sources = adapter.read_sources(change.target)
    assert (sources.file, sources.fabric) == ("node1=both,node2", "node1,node2")
    assert adapter.stale([change]) == []
    assert adapter.apply([change]).phase == records.NOOP
