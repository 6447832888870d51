"""What the loop records for the alert replay (the exporters' text as Prometheus would store it), and the
demo without a rule engine: it says so plainly and carries on."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from demo.alert_replay import SERIES_FILE, load_rules, replay_run
from demo.scenario import RULE_SETTINGS
from demo.series import INSTANCE, SeriesRecorder

NODE_TEXT = """\
# HELP ibpool_gpu_up 1 when the GPU answers NVML
# TYPE ibpool_gpu_up gauge
ibpool_gpu_up{gpu="0",uuid="GPU-a"} 1
ibpool_gpu_up{gpu="1",uuid="GPU-b"} 0
ibpool_gpu_job_info{gpu="0",job="17",pool="recsys",uuid="GPU-a"} 1
ibpool_gpu_temperature_celsius{gpu="0",uuid="GPU-a"} 55
ibpool_gpu_utilization_ratio{gpu="0",uuid="GPU-a"} NaN
"""
TARGETS = json.dumps(
    [
        {
            "targets": ["127.0.0.1:4242"],
            "labels": {"node": "n1", "pool": "recsys", "__metrics_path__": "/nodes/n1/metrics"},
        }
    ]
)


def test_the_recorder_keeps_what_the_rules_read_with_prometheus_target_labels(tmp_path: Path) -> None:
    recorder = SeriesRecorder({"ibpool_gpu_up", "ibpool_gpu_job_info", "ibpool_gpu_utilization_ratio"})
    recorder.discovered(TARGETS)
    recorder.scraped("http://127.0.0.1:4242/nodes/n1/metrics", NODE_TEXT, 1000.0)
    recorder.scraped("http://127.0.0.1:4242/nodes/n1/metrics", None, 1600.0)  # a failed scrape
    recorder.scraped("http://127.0.0.1:4242/fabric/metrics", "ibpool_gpu_up 1\n", 1000.0)
    recorder.scraped("http://127.0.0.1:4242/unknown", "ibpool_gpu_up 1\n", 1000.0)  # not a target: dropped
    assert recorder.write(tmp_path / "m.gz") == 7
    lines = [json.loads(x) for x in gzip.decompress((tmp_path / "m.gz").read_bytes()).decode().splitlines()]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_name.setdefault(str(line["metric"]["__name__"]), []).append(line)
    node = {"job": "ibpool-exporter", "instance": f"{INSTANCE}/n1", "node": "n1"}
    up = [x for x in by_name["up"] if x["metric"]["job"] == "ibpool-exporter"]
    assert up == [
        {"metric": {"__name__": "up", **node}, "timestamps": [1000000, 1600000], "values": [1.0, 0.0]}
    ]
    gpus = sorted((x["metric"]["gpu"], x["values"]) for x in by_name["ibpool_gpu_up"] if "gpu" in x["metric"])
    assert gpus == [("0", [1.0]), ("1", [0.0])]
    (info,) = by_name["ibpool_gpu_job_info"]
    assert info["metric"]["exported_job"] == "17"  # a scraped label that clashes with a target label
    assert info["metric"]["job"] == "ibpool-exporter"
    assert info["metric"]["pool"] == "recsys"  # the scraped pool (the target has no pool label)
    assert "ibpool_gpu_temperature_celsius" not in by_name  # no rule reads it
    assert "ibpool_gpu_utilization_ratio" not in by_name  # NaN is left out of the JSON lines
    fabric = [x for x in by_name["ibpool_gpu_up"] if x["metric"]["job"] == "ibpool-fabric"]
    assert fabric[0]["metric"]["instance"] == f"{INSTANCE}/fabric"


def test_without_vmalert_the_demo_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / SERIES_FILE).parent.mkdir(parents=True)
    (tmp_path / SERIES_FILE).write_bytes(gzip.compress(b""))
    monkeypatch.setattr("postmortem.replay.store.shutil.which", lambda name: None)
    ruleset, why = load_rules(None, dict(RULE_SETTINGS))
    assert ruleset is not None and why == ""
    result = replay_run(tmp_path, ruleset, why, 0.0, 3600.0)
    assert not result.replayed
    assert result.status == "not replayed: victoria-metrics not installed (Debian package victoria-metrics)"
    stored = json.loads((tmp_path / "alerts.json").read_text())
    assert stored["status"] == result.status and stored["firings"] == []


def test_unloadable_rules_are_reported_not_raised(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("groups: nope\n")
    ruleset, why = load_rules([bad], {})
    assert ruleset is None and "no `groups` list" in why
    result = replay_run(tmp_path, ruleset, why, 0.0, 60.0)
    assert result.status.startswith("not replayed: rules:")
