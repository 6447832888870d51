"""One schema in the long-term store: a pushed point and a forwarded sample of a metric are one series.

A real `ibpool exporter --simulate` (two GPUs, a job on GPU 0 whose own `job` and `pool` labels clash with
target labels) pushes to a real VictoriaMetrics, run with the long-term store's flags, with
`--influx.labels` giving it the target labels the scrape gives it. A real Prometheus scrapes the same
exporter as `ibpool targets` lists a node (labels node, instance, pool, cluster) and remote-writes into
the same VictoriaMetrics through the remote_write section of deploy/prometheus/prometheus.yml (URL
replaced). Then one PromQL query reads both paths' points: every series of the metrics both carry holds
samples Prometheus scraped (the timestamps in Prometheus's own TSDB) and samples the exporter pushed (the
others), so they have the same name and labels; no pushed series stands alone. And `ibpool postmortem`
reads the window from the real Prometheus and from VictoriaMetrics alike, over PromQL.
"""

from __future__ import annotations

import html
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from postmortem.cli import main as postmortem_main
from simulator.backends import victoria_metrics
from simulator.backends.victoria_metrics import LONG_TERM_ARGS, VICTORIA_METRICS, VictoriaMetrics
from tests.integration import prometheus_server
from tests.integration.processes import free_port, ibpool_argv, start_http_program, stop, wait_until
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer
from tests.proposals.factory import FakeClock, open_store

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
    pytest.mark.skipif(VICTORIA_METRICS is None, reason="victoria-metrics is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "deploy" / "prometheus" / "prometheus.yml"
BOTH = (
    "ibpool_gpu_up",
    "ibpool_gpu_utilization_ratio",
    "ibpool_gpu_job_info",
    "ibpool_infiniband_port_transmit_wait_total",
    "ibpool_infiniband_port_info",
)
SCRAPE_ONLY = ("ibpool_influx_", "ibpool_exporter_scrape", "ibpool_exporter_last_scrape")
Key = tuple[tuple[str, str], ...]


def prometheus_config(exporter_port: int, vm: VictoriaMetrics) -> str:
    (remote,) = yaml.safe_load(SHIPPED.read_text())["remote_write"]
    remote = {**remote, "url": f"{vm.url}/api/v1/write", "queue_config": {"batch_send_deadline": "1s"}}
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "external_labels": {"cluster": "lab"}},
        "remote_write": [remote],
        "scrape_configs": [
            {
                "job_name": "ibpool-node",
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{exporter_port}"],
                        # as `ibpool targets` writes a node's group
                        "labels": {
                            "node": "node0001",
                            "instance": "node0001",
                            "pool": "hi",
                            "cluster": "lab",
                        },
                    }
                ],
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def scraped_stamps(prom: PrometheusServer, at: float) -> dict[str, set[int]]:
    """Metric name -> the timestamps (ms) of Prometheus's own samples of it in the 5 minutes before `at`."""
    out: dict[str, set[int]] = {}
    for series in prom.query('{__name__=~"ibpool_.*"}[5m]', at):
        name = series["metric"]["__name__"]
        out.setdefault(name, set()).update(round(float(t) * 1000) for t, _ in series["values"])
    return out


def stored(vm: VictoriaMetrics, until_ms: int) -> dict[Key, list[int]]:
    """The long-term store's series (labels, `__name__` included) -> their timestamps up to `until_ms`."""
    vm.flush()
    out: dict[Key, list[int]] = {}
    for series in vm.export('{__name__=~"ibpool_.*"}'):
        stamps = [int(t) for t in series["timestamps"] if int(t) <= until_ms]
        out.setdefault(tuple(sorted(series["metric"].items())), []).extend(stamps)
    return out


def kinds(store: dict[Key, list[int]], scraped: dict[str, set[int]]) -> dict[Key, tuple[int, int]]:
    """Series of the metrics both paths carry -> (forwarded samples, pushed samples)."""
    out = {}
    for key, stamps in store.items():
        name = dict(key)["__name__"]
        if name in scraped:
            forwarded = sum(1 for t in stamps if t in scraped[name])
            out[key] = (forwarded, len(stamps) - forwarded)
    return out


def test_pushed_and_forwarded_points_of_a_metric_are_one_series(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "0").write_text("job=4242\npool=training\n")
    with ExitStack() as stack:
        vm = stack.enter_context(victoria_metrics.running(tmp_path / "vm", extra_args=LONG_TERM_ARGS))
        port = free_port()
        argv = ibpool_argv(
            "exporter", "--simulate", "--simulate.gpus", "2", "--simulate.ports", "2",
            "--web.listen-address", f"127.0.0.1:{port}", "--jobs.directory", str(jobs),
            "--influx.url", vm.url, "--influx.interval-seconds", "0.5",
            "--influx.flush-interval-seconds", "0.2",
            "--influx.labels", "instance=node0001,node=node0001,cluster=lab",
        )  # fmt: skip
        exporter = start_http_program(argv, port)
        stack.callback(stop, exporter)
        workdir = tmp_path / "prometheus"
        workdir.mkdir()
        prom = stack.enter_context(prometheus_server.running(prometheus_config(port, vm), workdir=workdir))
        prom.wait_for_targets(up=1)

        def both_paths_arrived() -> bool:
            at = time.time() - 2
            found = kinds(stored(vm, round(at * 1000)), scraped_stamps(prom, at))
            gpu_up = [v for k, v in found.items() if dict(k)["__name__"] == "ibpool_gpu_up"]
            return len(gpu_up) == 2 and all(f >= 3 and p >= 3 for f, p in gpu_up)

        wait_until(both_paths_arrived, 60.0, "scraped and pushed samples of ibpool_gpu_up in VictoriaMetrics")
        at = time.time() - 2
        scraped = scraped_stamps(prom, at)
        found = kinds(stored(vm, round(at * 1000)), scraped)
        reports = {
            name: postmortem(url, at, tmp_path / name) for name, url in (("p", prom.url), ("v", vm.url))
        }

    names = {dict(key)["__name__"] for key in found}
    assert set(BOTH) <= names
    only_pushed = [key for key, (forwarded, _) in found.items() if forwarded == 0]
    assert only_pushed == [], "pushed series that no forwarded sample joined: their labels differ"
    both = [key for key, (forwarded, pushed) in found.items() if forwarded and pushed]
    assert {dict(key)["__name__"] for key in both} >= set(BOTH)
    for key, (_, pushed) in found.items():  # what only the scrape serves: its own and the push's self metrics
        labels = dict(key)
        if pushed == 0:
            assert labels["__name__"].startswith(SCRAPE_ONLY) or labels.get("collector") == "influx_push", key
    assert len({dict(k)["__name__"] for k in found}) >= 20  # the whole node, not a handful of metrics
    for key in found:
        labels = dict(key)
        assert (labels["job"], labels["instance"], labels["node"], labels["cluster"]) == (
            "ibpool-node",
            "node0001",
            "node0001",
            "lab",
        )
        assert "exported_pool" not in labels
        if labels["__name__"] != "ibpool_gpu_job_info":
            assert "pool" not in labels, key  # the target's pool stays off node series
    (job_info,) = [dict(k) for k in found if dict(k)["__name__"] == "ibpool_gpu_job_info"]
    assert (job_info["exported_job"], job_info["pool"], job_info["gpu"]) == ("4242", "training", "0")
    # `ibpool postmortem` reads both over PromQL: neither holds recorded series or ALERTS (no rules were
    # loaded), so the shipped rules are replayed over each one's raw series
    for name, url in (("p", prom.url), ("v", vm.url)):
        said = f"replayed by vmalert from the shipped rules ({REPO / 'alerts'}) over the PromQL API at {url}"
        assert f"{said}, which holds no ALERTS" in reports[name], name


def postmortem(url: str, at: float, out: Path) -> str:
    """The report of the last minute from the PromQL API at `url`, with an empty proposal store."""
    out.mkdir()
    with open_store(out / "ibpool.db", FakeClock()):
        pass
    argv = ["--prometheus.url", url, "--db", str(out / "ibpool.db"), "--out", str(out / "report.html")]
    assert postmortem_main([*argv, "--from", f"{at - 60:.0f}", "--to", f"{at:.0f}"]) == 0
    return html.unescape((out / "report.html").read_text(encoding="utf-8"))
