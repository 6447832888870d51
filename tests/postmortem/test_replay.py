"""The rule replay: the shipped rule files, ordered by dependency, evaluated by a real vmalert over series
in a real VictoriaMetrics; `for:` and severities as the rule engine applies them; a copy from another
Prometheus HTTP API (a second VictoriaMetrics standing in for a long-term store); a missing engine."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from postmortem import alerts as alert_views
from postmortem.live_replay import replay_window
from postmortem.model import InputError
from postmortem.prometheus import PromQLSource
from postmortem.replay import ReplayUnavailableError, RuleSet, ScratchStore, gzip_lines, replay_lines
from postmortem.replay.errors import ReplayError
from postmortem.replay.source import copy_lines

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "alerts"
T0 = 1_700_000_400.0  # a whole hour, months in the past: the scratch store keeps it (retention 100y)
STEP = 300  # one sample every 5 minutes, as a sparse scrape would leave them

needs_engine = pytest.mark.skipif(
    shutil.which("vmalert") is None or shutil.which("victoria-metrics") is None,
    reason="needs vmalert and victoria-metrics (Debian package victoria-metrics)",
)


def _series(name: str, labels: dict[str, str], values: list[float]) -> dict[str, Any]:
    return {
        "metric": {"__name__": name, "job": "ibpool-scheduler", "instance": "s:1", **labels},
        "timestamps": [int((T0 + i * STEP) * 1000) for i in range(len(values))],
        "values": values,
    }


def pools(pending_from: int, pending_to: int, samples: int = 36) -> list[dict[str, Any]]:
    """Pool `a` queues 16 GPUs in samples [pending_from, pending_to) while `b` has idle GPUs."""
    pending = [16.0 if pending_from <= i < pending_to else 0.0 for i in range(samples)]
    return [
        _series("ibpool_pool_pending_gpus", {"pool": "a"}, pending),
        _series("ibpool_pool_pending_gpus", {"pool": "b"}, [0.0] * samples),
        _series("ibpool_pool_capacity_gpus", {"pool": "a"}, [64.0] * samples),
        _series("ibpool_pool_capacity_gpus", {"pool": "b"}, [64.0] * samples),
        _series("ibpool_pool_allocated_gpus", {"pool": "a"}, [64.0] * samples),
        _series("ibpool_pool_allocated_gpus", {"pool": "b"}, [32.0] * samples),
    ]


def test_levels_put_recording_rules_before_their_readers() -> None:
    rules = RuleSet.load([ALERTS])
    levels = rules.level_of()
    by_name = {r.name: levels[i] for i, r in enumerate(rules.rules) if not r.is_alert}
    congestion = by_name["fabric_port:ibpool_fabric_port_congestion:ratio_rate5m"]
    assert by_name["fleet:ibpool_fabric_port_wait_tick_bytes:default"] < congestion
    alert = next(levels[i] for i, r in enumerate(rules.rules) if r.name == "IbPortCongested")
    assert alert > congestion
    texts = rules.levels()
    assert len(texts) == max(levels.values()) + 1
    assert "IbPortCongested" in texts[alert] and "IbPortCongested" not in texts[0]
    assert rules.alert("IbPortCongested", "critical") is not None
    assert rules.alert("IbPortCongested", "critical").severity == "critical"  # type: ignore[union-attr]


def test_settings_replace_a_recording_rule_and_typos_are_refused() -> None:
    name = "fleet:ibpool_fabric_port_wait_tick_bytes:default"
    rules = RuleSet.load([ALERTS], {name: "vector(65536)"})
    assert next(r.expr for r in rules.rules if r.name == name) == "vector(65536)"
    with pytest.raises(ReplayError, match="no recording rule of that name"):
        RuleSet.load([ALERTS], {"fleet:no_such_setting": "vector(1)"})
    with pytest.raises(ReplayError, match="no rule files"):
        RuleSet.load([REPO / "docs"])


def test_a_missing_engine_says_which_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr("postmortem.replay.store.shutil.which", lambda n: None if n == "vmalert" else real(n))
    with pytest.raises(
        ReplayUnavailableError, match=r"vmalert not installed \(Debian package victoria-metrics\)"
    ):
        replay_lines(gzip_lines(pools(2, 10)), RuleSet.load([ALERTS]), T0, T0 + 3600)


@needs_engine
@pytest.mark.integration
def test_for_and_severity_come_from_the_rule_engine(tmp_path: Path) -> None:
    rules = RuleSet.load([ALERTS])
    long_queue = replay_lines(gzip_lines(pools(2, 12)), rules, T0, T0 + 36 * STEP)
    fired = [f for f in long_queue.firings if f.name == "GpuPoolImbalanced"]
    assert len(fired) == 1
    (firing,) = fired
    assert firing.severity == "warning" and dict(firing.labels)["pool"] == "a"
    assert firing.start == T0 + 2 * STEP + 15 * 60  # pending from the first queued sample, for: 15m
    assert firing.end == T0 + 12 * STEP  # the queue emptied: resolved at the next evaluation
    assert firing.duration() == firing.end - firing.start

    short_queue = replay_lines(gzip_lines(pools(2, 4)), rules, T0, T0 + 36 * STEP)
    assert [f for f in short_queue.firings if f.name == "GpuPoolImbalanced"] == []  # 10 min < for: 15m

    text = (ALERTS / "alert_rules.yml").read_text()
    changed = tmp_path / "alert_rules.yml"
    changed.write_text(text.replace("        for: 15m\n", "        for: 5m\n", 1))
    shutil.copy(ALERTS / "recording_rules.yml", tmp_path / "recording_rules.yml")
    quicker = replay_lines(gzip_lines(pools(2, 4)), RuleSet.load([tmp_path]), T0, T0 + 36 * STEP)
    assert [f.name for f in quicker.firings] == ["GpuPoolImbalanced"]  # the operator's own rule change


@needs_engine
@pytest.mark.integration
def test_a_window_of_another_store_replays_without_touching_it() -> None:
    rules = RuleSet.load([ALERTS])
    old_results = [  # what a Prometheus recorded and fired then: never copied, computed again
        _series("pool:ibpool_pool_pending_gpus:sum", {"pool": "a"}, [99.0] * 36),
        _series("ALERTS", {"alertname": "Old", "alertstate": "firing"}, [1.0] * 36),
    ]
    with ScratchStore.start() as source:
        source.import_lines(gzip_lines(pools(2, 12) + old_results))
        source.flush()
        store = PromQLSource.at(source.url)
        data, names = copy_lines(store, rules, start=T0, end=T0 + 36 * STEP)
        assert "ibpool_pool_pending_gpus" in names
        assert "pool:ibpool_pool_pending_gpus:sum" not in names and "ALERTS" not in names
        replayed = replay_window(store, rules, T0, T0 + 36 * STEP, series=True)
        assert [(a.name, a.severity, a.labels["pool"]) for a in replayed.alerts] == [
            ("GpuPoolImbalanced", "warning", "a")
        ]
        assert replayed.alerts[0].summary.startswith("GPU demand pending")
        assert "ibpool_pool_pending_gpus" in replayed.alerts[0].expr
        assert replayed.series is not None  # the recording rules as the replay computed them
        pending = dict(replayed.series.pending["a"])
        assert pending[T0 + 5 * STEP] == 16.0 and pending[T0 + 20 * STEP] == 0.0
        assert len(source.export("ALERTS", T0 - 86400, T0 + 86400)) == 1  # results went to a scratch store
        assert data[:2] == b"\x1f\x8b"


@needs_engine
@pytest.mark.integration
def test_a_broken_rule_file_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - alert: A\n        expr: sum(\n")
    with pytest.raises(ReplayError, match="vmalert exited"):
        replay_lines(gzip_lines(pools(2, 12)), RuleSet.load([bad]), T0, T0 + 3600)
    with pytest.raises(InputError, match="alerts not replayed"):
        alert_views.replay_run(_write(tmp_path, pools(2, 12)), RuleSet.load([bad]), T0, T0 + 3600)


def _write(tmp_path: Path, series: list[dict[str, Any]]) -> Path:
    path = tmp_path / "metrics.jsonl.gz"
    path.write_bytes(gzip_lines(series))
    return path
