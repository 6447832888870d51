"""The embedded source and `ibpool recommend --once` against the in-process simulated cluster server.

The cluster's QoS tables reach the source through the simulator's reader (`/-/model`) in the library
test, and through an opensm.conf written from the same model in the command test (what a site has)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.cli import main
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from recommender.signals.model import LINKS, NODES, POOLS, QOS
from simulator.cluster import scenarios
from simulator.cluster.model import ClusterModel
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.qos_reader import SimulatorQos


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterServer]:
    model = ClusterModel(scenarios.shared_uplink_spec(), [scenarios.chatty("hi"), scenarios.chatty("lo")])
    model.advance(10.0)
    work = tmp_path_factory.mktemp("cluster")
    server = ClusterServer(model, ServerSettings(listen_address="127.0.0.1:0", speed=1.0, workdir=work))
    server.start()
    yield server
    server.close()


def test_embedded_signals(cluster: ClusterServer) -> None:
    base = f"http://127.0.0.1:{cluster.port}"
    source = EmbeddedSource(
        EmbeddedSettings(f"{base}/targets", window_seconds=2.0), SimulatorQos(f"{base}/-/model")
    )
    got = source.fetch()
    assert got.missing == ()
    assert got.pools["hi"].capacity_gpus == 16 and got.pools["hi"].allocated_gpus == 16
    assert got.nodes["node0001"].pools == ("hi",) and got.nodes["node0003"].state == "idle"
    hca = got.links["node0001/mlx5_0/1"]
    assert hca.congestion is not None and 0.3 < hca.congestion < 0.6
    assert hca.utilization is not None and 0.4 < hca.utilization < 0.6
    uplinks = [
        link for link in got.links.values() if link.pools == ("hi", "lo") and link.desc.startswith("leaf")
    ]
    assert len(uplinks) == 2
    for link in uplinks:  # congested; once the 32-bit wait counter saturates, flagged and unknown
        assert (link.saturated and link.congestion is None) or (link.congestion or 0.0) > 0.2
    assert got.qos is not None and got.qos.vl_of("hi") == 1


def test_unreachable_exporters_are_missing_signals() -> None:
    source = EmbeddedSource(
        EmbeddedSettings("http://127.0.0.1:9/targets", window_seconds=0.01, timeout_seconds=0.5),
        sleep=lambda _: None,
    )
    got = source.fetch()
    assert {m.signal for m in got.missing} >= {POOLS, NODES, LINKS, QOS}
    assert got.pools == {}


def _opensm_conf(cluster: ClusterServer, path: Path) -> list[str]:
    """The cluster's QoS tables as opensm.conf lines at `path`; the `--pool-sl` flags of its pools."""
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.port}/-/model", timeout=5) as answer:
        model = json.load(answer)
    qos = model["qos"]
    high = qos["vlarb_high"] or "0:0"  # an empty table is written as one zero-weight entry in opensm.conf
    path.write_text(f"qos_vlarb_high {high}\nqos_vlarb_low {qos['vlarb_low']}\nqos_sl2vl {qos['sl2vl']}\n")
    return [f"{name}={pool['service_level']}" for name, pool in model["pools"].items()]


def test_once_end_to_end(cluster: ClusterServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{cluster.port}/targets"
    conf = tmp_path / "opensm.conf"
    pool_sl = _opensm_conf(cluster, conf)
    argv = [
        "--once",
        "--json",
        "--embedded.targets",
        url,
        "--db",
        str(tmp_path / "p.db"),
        "--priority",
        "hi=1",
    ]
    argv += ["--embedded.window-seconds", "2", "--qos.file", str(conf)]
    argv += [arg for item in pool_sl for arg in ("--pool-sl", item)]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["ok"] and first["missing"] == [] and first["source"] == "embedded"
    assert first["proposals"] == []  # the stall must persist first (2 min by default)
    assert (tmp_path / "p.db.recommender-state.json").exists()


def test_once_reports_missing_signals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--once", "--embedded.targets", "http://127.0.0.1:9/targets", "--db", str(tmp_path / "p.db")]
    argv += ["--embedded.window-seconds", "0.01"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "missing signal pools" in out and "missing signal links" in out


def test_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--once", "--interval", "0", "--db", str(tmp_path / "p.db")]) == 2
    err = capsys.readouterr().err
    assert "interval_seconds: must be > 0" in err and "--embedded.targets" in err
