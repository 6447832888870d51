"""`ibpool simulate`: flags, presets, spec files, trace replay, and the command end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from simulator.serve.config import load_config
from simulator.serve.main import build_model, main
from tests.helpers import TRACE
from tests.integration.processes import free_port, http_get, start_http_program, stop

SPEC = """
seed: 3
nodes: 24
fabric: {hosts_per_leaf: 8, oversubscription: 2.0}
pools:
  - {name: a, nodes: 8, priority_class: high}
  - {name: b, nodes: 8}
  - {name: c, nodes: 8}
"""


def test_every_config_problem_is_reported_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--nodes", "1", "--speed", "-1", "--max-materialized", "0", "--log.level", "loud"]) == 2
    err = capsys.readouterr().err
    for key in ("nodes", "speed", "max_nodes", "log_level"):
        assert f": {key}:" in err


def test_a_missing_spec_or_trace_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("nodes: 4\npools: [{name: a, nodes: 9}]\n")
    assert main(["--spec", str(bad), "--trace", str(tmp_path / "none.csv"), "--nodes", "4"]) == 2
    err = capsys.readouterr().err
    assert "spec_file" in err and "9 asked" in err and "trace_file" in err and ": nodes:" in err


def test_presets_resize_and_keep_two_pools() -> None:
    model = build_model(load_config(["--preset", "large", "--nodes", "10", "--seed", "4"]))
    assert len(model.spec.nodes) == 10 and [p.name for p in model.spec.pools] == ["recsys", "llm"]
    assert model.spec.pools[0].priority_class == "high"
    model.advance(14 * 3600)
    assert model.job_states()["running"] > 0


def test_a_spec_file_gets_demand_on_every_pool(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yml"
    spec.write_text(SPEC)
    model = build_model(load_config(["--spec", str(spec)]))
    model.advance(24 * 3600)
    assert {job.pool for job in model.jobs.values()} == {"a", "b", "c"}


def test_a_trace_sizes_the_cluster_and_drives_it() -> None:
    model = build_model(load_config(["--trace", str(TRACE), "--trace-minutes", "60"]))
    assert len(model.spec.pools) == 16
    model.advance(3600)
    assert model.job_states()["running"] > 0


@pytest.mark.integration
def test_the_command_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "simulator.serve.main",
        f"--web.listen-address=127.0.0.1:{port}",
        "--nodes=4",
        "--speed=0",
        "--warmup=3600",
        f"--workdir={tmp_path}",
    ]
    proc = start_http_program(argv, port, ready_path="/healthz", timeout=60)
    try:
        status, body = http_get(port, "/healthz")
        assert status == 200, body
        assert len(json.loads(http_get(port, "/targets")[1])) == 4
        assert http_get(port, "/nodes/node0001/metrics")[0] == 200
        assert json.loads(http_get(port, "/-/model")[1])["time_seconds"] == 3600
    finally:
        assert stop(proc, timeout=30) == 0
    assert list(tmp_path.iterdir()) == [tmp_path / "nodes"] and not list((tmp_path / "nodes").iterdir())
