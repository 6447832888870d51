"""Config (flags over YAML, every problem at once) and the served exporter, on fake Slurm clients."""

from __future__ import annotations

import http.client
import threading
from pathlib import Path

import pytest

from exporter.scheduler.config import SchedulerExporterConfig, load_config
from exporter.scheduler.main import SchedulerExporter, main, serve
from foundation.errors import ConfigError
from tests.exporter.scheduler.fake_slurm import FakeSlurm
from tests.helpers import samples_of, wait_for


def test_defaults() -> None:
    assert load_config([]) == SchedulerExporterConfig()


def test_yaml_then_flags(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text("")
    (tmp_path / "bin").mkdir()
    cfg_file = tmp_path / "cfg.yml"
    cfg_file.write_text(
        "web: {listen_address: '127.0.0.1:9999', telemetry_path: /m}\n"
        "slurm: {bin_dir: bin, conf: slurm.conf, poll_interval_seconds: 5, timeout_seconds: 2,\n"
        "        max_age_seconds: 30, gpus_per_node: 4, gres_name: gpu}\n"
        "log: {level: debug}\n"
    )
    cfg = load_config([f"--config.file={cfg_file}", "--slurm.gpus-per-node=8", "--log.level=warning"])
    assert cfg == SchedulerExporterConfig(
        listen_address="127.0.0.1:9999",
        telemetry_path="/m",
        slurm_bin_dir=tmp_path / "bin",
        slurm_conf=tmp_path / "slurm.conf",
        poll_interval_seconds=5.0,
        timeout_seconds=2.0,
        max_age_seconds=30.0,
        gpus_per_node=8,
        log_level="warning",
    )


def test_every_problem_is_reported_with_its_file_and_key(tmp_path: Path) -> None:
    cfg_file = tmp_path / "cfg.yml"
    cfg_file.write_text(
        "slurm: {conf: missing.conf, gpus_per_node: 2.5, timeout_seconds: 0, surprise: 1}\n"
        "web: {listen_address: x}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config([f"--config.file={cfg_file}", "--slurm.gres-name=g p u", "--slurm.max-age-seconds=1"])
    problems = caught.value.problems
    assert f"{cfg_file}: slurm.surprise: unknown key" in problems
    assert f"{cfg_file}: slurm.gpus_per_node: must be a number, got 2.5" in problems
    assert f"{cfg_file}: timeout_seconds: must be > 0" in problems
    assert any(p.startswith(f"{cfg_file}: slurm_conf: file not found") for p in problems)
    assert any(p.startswith(f"{cfg_file}: listen_address: expected host:port") for p in problems)
    assert "flag: gres_name: not a GRES name: 'g p u'" in problems
    assert any(p.startswith("flag: max_age_seconds: must be at least") for p in problems)
    assert len(problems) == 7


def test_main_exits_2_on_an_invalid_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--slurm.poll-interval-seconds=-1", "--slurm.bin-dir=/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err
    assert "flag: poll_interval_seconds: must be > 0" in err
    assert "flag: slurm_bin_dir: not a directory: /nonexistent" in err


def test_main_exits_1_when_the_slurm_clients_are_missing(tmp_path: Path) -> None:
    assert main([f"--slurm.bin-dir={tmp_path}", "--web.listen-address=127.0.0.1:0"]) == 1


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_served_metrics_follow_slurm_going_down_and_coming_back(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path)
    cfg = SchedulerExporterConfig(
        listen_address="127.0.0.1:0",
        slurm_bin_dir=fake.bin_dir,
        slurm_conf=fake.conf,
        poll_interval_seconds=0.05,
        timeout_seconds=5,
        max_age_seconds=20,
    )
    exporter = SchedulerExporter(cfg)
    exporter.start()
    try:

        def scrape() -> str:
            return _get(exporter.port, "/metrics")[1]

        def up(value: float) -> bool:
            return samples_of(scrape(), "ibpool_scheduler_up") == {(): value}

        def health_says(text: str) -> bool:
            return text in _get(exporter.port, "/healthz")[1]

        assert wait_for(lambda: up(1), 20)
        assert samples_of(scrape(), "ibpool_pool_capacity_gpus") == {
            (("pool", "inference"),): 32,
            (("pool", "training"),): 32,
        }
        assert _get(exporter.port, "/healthz")[0] == 200
        fake.use("down")
        assert wait_for(lambda: up(0), 20)
        text = scrape()
        assert "ibpool_pool_" not in text
        assert "ibpool_node_state_info" not in text
        assert "ibpool_scheduler_poll_timestamp_seconds" in text
        # A poll that straddled the switch to "down" may have failed on another command first.
        assert wait_for(
            lambda: health_says(
                "collector scheduler failing: NoFreshDataError: last scheduler poll failed: sinfo reported"
            ),
            20,
        )
        fake.use("gres")
        fake.write("sinfo.json", "garbage")
        assert wait_for(lambda: health_says("sinfo: output is not JSON"), 20)
        fake.write("sinfo.json", '{"errors": [], "nodes": [{"name": 3}]}')
        assert wait_for(lambda: health_says("`name` is not a string"), 20)
        assert up(0)
        fake.use("gres")
        assert wait_for(lambda: up(1), 20)
    finally:
        exporter.close()


def test_serve_returns_0_when_stopped(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path)
    cfg = SchedulerExporterConfig(
        listen_address="127.0.0.1:0", slurm_bin_dir=fake.bin_dir, slurm_conf=fake.conf
    )
    stop = threading.Event()
    stop.set()
    assert serve(cfg, stop) == 0
