"""A PromQL store: query_range over the recording rules and ALERTS (a fake HTTP responder) plus the
proposal store's audit log, through `main(argv)`; and the source's parsing on a fake Fetch."""

from __future__ import annotations

import json
import math
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from postmortem import live
from postmortem.cli import main
from postmortem.model import InputError
from postmortem.prometheus import PromQLSource
from postmortem.source import Selector
from tests.proposals.factory import T0, FakeClock, open_store, proposal, vl_weights_doc

APPLY_AT = T0.timestamp() + 120.0
REPO = Path(__file__).resolve().parents[2]


def _value(query: str, labels: dict[str, str], at: float) -> float | None:
    after = at > APPLY_AT
    if query == live.UTILIZATION.promql():
        return (0.8 if after else 0.3) if labels["pool"] == "a" else 0.5
    if query == live.PENDING.promql():
        return (0.0 if after else 16.0) if labels["pool"] == "a" else float("nan")
    if query == live.FABRIC_CONGESTION.promql():
        return 0.1 if after else 0.5
    if query == live.HCA_CONGESTION.promql():
        return 0.05
    if query == live.ALERTS.promql():
        if labels["alertname"] == "IbPortCongested":
            return 1.0 if T0.timestamp() - 600 <= at <= T0.timestamp() + 600 else None
        return 1.0 if T0.timestamp() + 300 <= at <= T0.timestamp() + 360 else None
    raise AssertionError(query)


SERIES: dict[str, list[dict[str, str]]] = {
    live.UTILIZATION.promql(): [{"pool": "a"}, {"pool": "b"}],
    live.PENDING.promql(): [{"pool": "a"}, {"pool": "b"}],
    live.FABRIC_CONGESTION.promql(): [{"node_guid": "0x2", "node_desc": "spine01", "port": "2"}],
    live.HCA_CONGESTION.promql(): [{"node": "node0001", "device": "mlx5_0", "port": "1"}],
    live.ALERTS.promql(): [
        {"alertname": "IbPortCongested", "alertstate": "firing", "port": "2"},
        {
            "alertname": "GpuFellOffBus",
            "alertstate": "firing",
            "severity": "critical",
            "node": "node0024",
            "gpu": "3",
        },
    ],
}


HIDDEN: set[str] = set()  # series the names endpoint leaves out (a store without them for the window)


def answer(params: Mapping[str, str]) -> dict[str, Any]:
    """A query_range answer for the fixed series above."""
    query = params["query"]
    if query in HIDDEN:
        return {"status": "success", "data": {"resultType": "matrix", "result": []}}
    if query not in SERIES:
        return {"status": "error", "errorType": "bad_data", "error": f"unknown {query}"}
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"].rstrip("s"))
    result = []
    for labels in SERIES[query]:
        values = []
        at = start
        while at <= end:
            value = _value(query, labels, at)
            if value is not None:
                values.append([at, "NaN" if math.isnan(value) else f"{value:g}"])
            at += step
        if values:
            result.append({"metric": labels, "values": values})
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.fixture
def fake_prometheus() -> Iterator[tuple[str, list[str]]]:
    queries: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/api/v1/label/__name__/values":
                names = sorted(query.split("{")[0] for query in SERIES if query not in HIDDEN)
                self._answer(json.dumps({"status": "success", "data": names}).encode())
                return
            if url.path != "/api/v1/query_range":
                self.send_error(404)
                return
            queries.append(params["query"])
            self._answer(json.dumps(answer(params)).encode())

        def _answer(self, body: bytes) -> None:
            self.send_response(200 if b'"success"' in body else 400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", queries
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def store_db(tmp_path: Path) -> Path:
    return fill_store(tmp_path / "ibpool.db")


def fill_store(db: Path) -> Path:
    """A store with one applied change at T0 + 2 min and one refused approval."""
    clock = FakeClock()
    with open_store(db, clock) as store:
        stored, _ = store.submit(proposal(), proposer="policy:quota")
        clock.advance(minutes=1)
        store.transition(stored.id, "approved", "alice", "looks right")
        clock.advance(minutes=1)
        store.transition(stored.id, "applying", "ibpool-apply", "apply started")
        store.transition(stored.id, "applied", "ibpool-apply", "applied and verified")
        other, _ = store.submit(proposal(vl_weights_doc(expected_effect="other")), proposer="policy:quota")
        store.transition(other.id, "rejected", "bob", "not now")
    return db


def test_report_from_prometheus_and_store(
    fake_prometheus: tuple[str, list[str]], store_db: Path, tmp_path: Path
) -> None:
    url, queries = fake_prometheus
    out = tmp_path / "report.html"
    argv = ["--prometheus.url", url, "--db", str(store_db), "--out", str(out)]
    argv += ["--from", "2024-05-01T11:30:00Z", "--to", "2024-05-01T12:30:00Z", "--effect-window", "10m"]
    assert main(argv) == 0
    assert set(queries) == set(SERIES)
    html = out.read_text()
    assert "Window: <b>2024-05-01 11:30</b> to <b>2024-05-01 12:30</b> UTC" in html
    effects = html[html.index('id="effects"') :]
    # pool a: utilization 0.3 -> 0.8, pending 16 -> 0 around the apply at 12:02
    assert "<td>a</td><td>GPU utilization</td><td class=num>0.3</td><td class=num>0.8</td>" in effects
    assert "<td>a</td><td>pending GPUs</td><td class=num>16</td><td class=num>0</td>" in effects
    assert "opensm.vlarb_low" in effects
    timeline = html[html.index('id="timeline"') : html.index('id="effects"')]
    assert "set_vl_weights" in timeline
    assert "approved by alice" in timeline
    assert "refused" in timeline or "refusal" in timeline
    assert "IbPortCongested" in timeline
    assert html.count('class="k-resolved"') >= 2
    faults = html[html.index('id="faults"') : html.index('id="timeline"')]
    assert "GpuFellOffBus" in faults
    alerts = html[html.index('id="alerts"') : html.index('id="pools"')]
    assert "ALERTS in the PromQL API at http" in alerts
    assert '<td class="severity sev-critical">critical</td><td>node0024 GPU 3</td>' in alerts
    assert "<td class=num>2 min</td>" in alerts  # 12:05 to 12:07
    links = html[html.index('id="links"') : html.index('id="faults"')]
    assert links.index("spine01/2") < links.index("node0001/mlx5_0/1")  # sorted by peak


def test_a_config_file_writes_the_same_report_as_the_flags(
    fake_prometheus: tuple[str, list[str]], store_db: Path, tmp_path: Path
) -> None:
    url, _ = fake_prometheus
    by_flags, by_file = tmp_path / "flags.html", tmp_path / "file.html"
    argv = ["--prometheus.url", url, "--db", str(store_db), "--alert", "GpuFellOffBus", "--margin", "5m"]
    argv += ["--from", "2024-05-01T11:00:00Z", "--to", "2024-05-01T13:00:00Z", "--grafana.url", "https://g"]
    assert main([*argv, "--out", str(by_flags)]) == 0
    config = tmp_path / "postmortem.yaml"
    config.write_text(
        f"prometheus: {{url: '{url}'}}\ndb: {store_db.name}\nalert: GpuFellOffBus\nmargin: 5m\n"
        "from: 2024-05-01T11:00:00Z\nto: 2024-05-01T13:00:00Z\ngrafana: {url: 'https://g'}\n"
    )
    assert main(["--config.file", str(config), "--out", str(by_file)]) == 0
    assert by_file.read_bytes() == by_flags.read_bytes()
    assert "Window: <b>2024-05-01 12:00</b> to <b>2024-05-01 12:12</b>" in by_file.read_text()
    config.write_text(config.read_text() + "margin: 10m\n")  # YAML: the last of a repeated key wins
    assert main(["--config.file", str(config), "--margin", "5m", "--out", str(by_file)]) == 0
    assert by_file.read_bytes() == by_flags.read_bytes()  # the flag wins over the file


def test_a_store_without_alerts_gets_the_rules_replayed_or_says_why_not(
    fake_prometheus: tuple[str, list[str]],
    store_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "HIDDEN", set(SERIES))  # no recorded series, no ALERTS
    monkeypatch.setattr("postmortem.replay.store.shutil.which", lambda name: None)
    url, _ = fake_prometheus
    out = tmp_path / "report.html"
    argv = ["--prometheus.url", url, "--db", str(store_db), "--out", str(out)]
    assert main([*argv, "--from", "2024-05-01T11:30:00Z", "--to", "2024-05-01T12:30:00Z"]) == 0
    html = out.read_text()
    reason = "alerts not replayed: victoria-metrics not installed (Debian package victoria-metrics)"
    alerts = html[html.index('id="alerts"') : html.index('id="pools"')]
    assert f"no ALERTS in the PromQL API at {url} for the window, and {reason}" in alerts
    assert f"(no recorded series for the window, and {reason})" in html
    assert "<table" not in alerts
    assert main([*argv, "--rules", str(REPO / "alerts")]) == 2  # asked for: an error


def test_alert_window_from_prometheus(
    fake_prometheus: tuple[str, list[str]], store_db: Path, tmp_path: Path
) -> None:
    url, _ = fake_prometheus
    out = tmp_path / "report.html"
    argv = ["--prometheus.url", url, "--db", str(store_db), "--out", str(out), "--alert", "GpuFellOffBus"]
    argv += ["--margin", "5m", "--from", "2024-05-01T11:00:00Z", "--to", "2024-05-01T13:00:00Z"]
    assert main(argv) == 0
    # fires at 12:05, last sample 12:06, resolved one step later (12:07); margin 5 minutes
    assert "Window: <b>2024-05-01 12:00</b> to <b>2024-05-01 12:12</b>" in out.read_text()


def test_unreachable_prometheus_and_missing_store(
    store_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    argv = ["--prometheus.url", "http://127.0.0.1:1", "--db", str(store_db), "--out", str(out)]
    assert main([*argv, "--from", "0", "--to", "60"]) == 2
    assert "cannot query the PromQL API" in capsys.readouterr().err
    assert main(["--prometheus.url", "http://127.0.0.1:1", "--out", str(out)]) == 2
    assert "a store needs --db" in capsys.readouterr().err
    assert main(["--prometheus.url", "http://x", "--db", str(tmp_path / "none.db"), "--out", str(out)]) == 2
    assert "no proposal store" in capsys.readouterr().err
    assert not out.exists()


def test_source_parsing_on_a_fake_fetch() -> None:
    def fetch(path: str, params: Mapping[str, str]) -> Any:
        assert path == "/api/v1/query_range"
        return answer(params)

    source = PromQLSource(fetch)
    start = T0.timestamp() - 1200
    data = live.load(source, start, start + 2400, 60.0)
    assert sorted(data.utilization) == ["a", "b"]
    assert data.pending["b"] == []  # NaN samples are left out
    assert all(v == 16.0 for at, v in data.pending["a"] if at <= APPLY_AT)
    assert sorted(data.congestion) == ["node0001/mlx5_0/1", "spine01/2"]
    kinds = [(e.kind, e.name) for e in sorted(data.events, key=lambda e: (e.at, e.kind))]
    assert ("alert", "IbPortCongested") in kinds
    assert ("resolved", "IbPortCongested") in kinds
    assert ("fault", "GpuFellOffBus") in kinds
    fired = next(e.at for e in data.events if e.kind == "alert" and e.name == "IbPortCongested")
    assert fired == T0.timestamp() - 600

    with pytest.raises(InputError, match="unknown"):
        source.select(Selector("nope"), start, start + 60, 60.0)


def test_store_audit_events(store_db: Path) -> None:
    events, effects = live.audit_events(store_db)
    assert [e.kind for e in events] == ["proposal", "approval", "apply", "proposal", "refusal"]
    assert effects == []  # no series to measure on
    assert events[2].at == APPLY_AT
    assert timedelta(seconds=events[2].at - events[0].at) == timedelta(minutes=2)
