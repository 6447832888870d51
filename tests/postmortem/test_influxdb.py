"""InfluxDB 2 as a report source: a contract test on recorded responses (no InfluxDB 2 server here).

A local HTTP server stands where InfluxDB 2's `/api/v2/query` would be and answers with annotated CSV as
InfluxDB 2 writes it (data/influxdb2/*.csv: CRLF lines, `#group`/`#datatype`/`#default` annotations, a new
annotation block where the columns change, an error table); influxdb-client's real query code posts the
Flux and parses the answers. Checked: the Flux generated from the report's selectors (exact text and
escaping), what the client sends (path, org, token, the query), the series and alerts read back, every
kind of failure as a clear error, a whole report from it through `main(argv)`, and the rules replayed by a
real vmalert over series copied from it.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from postmortem import live
from postmortem.cli import main
from postmortem.influxdb import FluxSource, flux_names, flux_select
from postmortem.live_replay import replay_window
from postmortem.model import InputError
from postmortem.replay import RuleSet
from postmortem.source import Selector
from tests.postmortem.test_prometheus import SERIES, _value, fill_store
from tests.postmortem.test_replay import ALERTS, STEP, needs_engine, pools
from tests.postmortem.test_replay import T0 as T0_REPLAY
from tests.proposals.factory import T0

RECORDED = Path(__file__).parent / "data" / "influxdb2"
START, END = T0.timestamp() - 1800, T0.timestamp() + 1800  # 11:30 to 12:30 UTC
TOKEN = "t0k3n"


@dataclass
class Request:
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeInflux:
    """Answers each POST /api/v2/query with `answer(flux) -> (status, content type, body)`."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)
    answer: Any = None


@pytest.fixture
def influx() -> Iterator[FakeInflux]:
    fake = FakeInflux()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append(
                Request(url.path, dict(urllib.parse.parse_qsl(url.query)), dict(self.headers.items()), body)
            )
            status, kind, payload = fake.answer(body["query"])
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def recorded(name: str) -> tuple[int, str, bytes]:
    return 200, "text/csv; charset=utf-8", (RECORDED / name).read_bytes()


def source(fake: FakeInflux) -> FluxSource:
    return FluxSource(fake.url, "ibpool", org="ibpool", token=TOKEN)


def test_flux_is_generated_from_the_selector() -> None:
    assert flux_select("ibpool", live.ALERTS, START, END, 60.0) == (
        'from(bucket: "ibpool")\n'
        "  |> range(start: 2024-05-01T11:30:00Z, stop: 2024-05-01T12:30:00Z)\n"
        '  |> filter(fn: (r) => r._measurement == "ALERTS" and r._field == "value")\n'
        '  |> filter(fn: (r) => r["alertstate"] == "firing")\n'
        "  |> aggregateWindow(every: 60s, fn: last, createEmpty: false)\n"
    )
    tricky = Selector('m"x', (("k", 'a"b\\c ${d}'),))
    text = flux_select('b"k', tricky, START + 0.25, END, 1.5)
    assert 'from(bucket: "b\\"k")' in text and "start: 2024-05-01T11:30:00.250Z" in text
    assert 'r._measurement == "m\\"x"' in text
    assert 'r["k"] == "a\\"b\\\\c \\${d}"' in text
    assert "every: 1500ms" in text
    assert flux_names("ibpool", START, END) == (
        'import "influxdata/influxdb/schema"\n\n'
        'schema.measurements(bucket: "ibpool", start: 2024-05-01T11:30:00Z, stop: 2024-05-01T12:30:00Z)\n'
    )


def test_the_client_posts_the_flux_and_reads_the_recorded_tables(influx: FakeInflux) -> None:
    influx.answer = lambda flux: recorded("pending.csv")
    store = source(influx)
    try:
        series = store.select(live.PENDING, START, END, 60.0)
    finally:
        store.close()
    (request,) = influx.requests
    assert request.path == "/api/v2/query" and request.params == {"org": "ibpool"}
    assert request.headers["Authorization"] == f"Token {TOKEN}"
    assert request.body["query"] == flux_select("ibpool", live.PENDING, START, END, 60.0)
    t = datetime(2024, 5, 1, 11, 31, tzinfo=UTC).timestamp()
    name = "pool:ibpool_pool_pending_gpus:sum"
    assert series == [
        ({"__name__": name, "cluster": "lab", "pool": "a"}, [(t, 16.0), (t + 60, 16.0), (t + 120, 0.0)]),
        ({"__name__": name, "cluster": "lab", "pool": "b"}, [(t, 0.0), (t + 60, 0.0), (t + 120, 0.0)]),
    ]


def test_tables_with_other_columns_become_their_own_series_and_alerts(influx: FakeInflux) -> None:
    influx.answer = lambda flux: recorded("alerts.csv")
    store = source(influx)
    try:
        found = live.alerts(store, START, END, 60.0)
    finally:
        store.close()
    by_name = {a.name: a for a in found}
    assert set(by_name) == {"IbPortCongested", "GpuFellOffBus"}
    congested = by_name["IbPortCongested"]
    assert congested.severity == "warning" and congested.subject() == "node0001/mlx5_0/1"
    assert congested.start == datetime(2024, 5, 1, 11, 50, tzinfo=UTC).timestamp()
    assert congested.duration == 180.0  # 11:50 to the step after 11:52
    assert by_name["GpuFellOffBus"].subject() == "node0024 GPU 3"


def test_names_come_from_schema_measurements(influx: FakeInflux) -> None:
    influx.answer = lambda flux: recorded("measurements.csv")
    store = source(influx)
    try:
        names = store.names(START, END)
    finally:
        store.close()
    assert names == {"ALERTS", "ibpool_gpu_up", "pool:ibpool_pool_pending_gpus:sum"}
    assert influx.requests[0].body["query"] == flux_names("ibpool", START, END)


def test_an_empty_answer_is_no_series(influx: FakeInflux) -> None:
    influx.answer = lambda flux: (200, "text/csv; charset=utf-8", b"\r\n")
    store = source(influx)
    try:
        assert store.select(live.HCA_CONGESTION, START, END, 60.0) == []
    finally:
        store.close()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (recorded("error.csv"), "query failed: runtime error @5:6-5:75: aggregateWindow: schema collision"),
        (
            (400, "application/json", b'{"code":"invalid","message":"compilation failed: undefined bad"}'),
            "HTTP 400: compilation failed: undefined bad",
        ),
        (
            (401, "application/json", b'{"code":"unauthorized","message":"unauthorized access"}'),
            "HTTP 401: unauthorized access",
        ),
        (
            (404, "application/json", b'{"code":"not found","message":"bucket \\"x\\" not found"}'),
            'bucket "x"',
        ),
    ],
    ids=["error-table", "bad-flux", "token", "bucket"],
)
def test_failures_are_clear_errors(influx: FakeInflux, answer: tuple[int, str, bytes], message: str) -> None:
    influx.answer = lambda flux: answer
    store = source(influx)
    try:
        with pytest.raises(InputError, match=r"InfluxDB at http://127\.0\.0\.1") as raised:
            store.select(live.PENDING, START, END, 60.0)
    finally:
        store.close()
    assert message in str(raised.value)


def test_an_unreachable_server_is_a_clear_error() -> None:
    store = FluxSource("http://127.0.0.1:1", "ibpool", timeout_s=5.0)
    try:
        with pytest.raises(InputError, match=r"cannot query InfluxDB at http://127\.0\.0\.1:1"):
            store.names(START, END)
    finally:
        store.close()


Value = Callable[[str, dict[str, str], float], float | None]


def annotated_csv(
    name: str, series: list[dict[str, str]], window: tuple[float, float, float], value: Value
) -> bytes:
    """What InfluxDB 2 answers for `name`'s series (the recorded files' format): one annotation block per
    set of tag columns, one table per series, a value per step from `value(name, labels, at)` over
    `window` (start, end, step)."""
    start, end, step = window

    def stamp(unix: float) -> str:
        return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    blocks: list[list[str]] = []
    columns: list[str] | None = None
    for table, labels in enumerate(series):
        tags = sorted(labels)
        if tags != columns:
            columns = tags
            blocks.append(
                [
                    "#group,false,false,true,true,false,false,true,true" + ",true" * len(tags),
                    "#datatype,string,long"
                    + ",dateTime:RFC3339" * 3
                    + ",double,string,string"
                    + ",string" * len(tags),
                    "#default,_result" + "," * (len(tags) + 7),
                    ",result,table,_start,_stop,_time,_value,_field,_measurement"
                    + "".join("," + t for t in tags),
                ]
            )
        at = start + step
        while at <= end:
            number = value(name, labels, at)
            if number is not None:
                cells = [str(table), stamp(start), stamp(end), stamp(at), f"{number:g}", "value", name]
                blocks[-1].append(",," + ",".join(cells + [labels[t] for t in tags]))
            at += step
    lines = [line for block in blocks for line in [*block, ""]]
    return ("\r\n".join(lines) + "\r\n").encode()


SERIES_QUERY = {query.split("{")[0]: query for query in SERIES}


def test_the_writer_below_writes_what_was_recorded() -> None:
    """The pending recording, rewritten by `annotated_csv` from the same values, is the same bytes."""
    pending = [{"cluster": "lab", "pool": "a"}, {"cluster": "lab", "pool": "b"}]
    values = {("a", 0): 16.0, ("a", 1): 16.0, ("a", 2): 0.0}

    def three(name: str, labels: dict[str, str], at: float) -> float | None:
        index = round((at - START) / 60) - 1
        return values.get((labels["pool"], index), 0.0) if index < 3 else None

    written = annotated_csv("pool:ibpool_pool_pending_gpus:sum", pending, (START, END, 60.0), three)
    assert written == recorded("pending.csv")[2]


def test_a_report_from_influxdb2(influx: FakeInflux, tmp_path: Path) -> None:
    db = fill_store(tmp_path / "ibpool.db")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")

    def answer(flux: str) -> tuple[int, str, bytes]:
        if "schema.measurements" in flux:
            names = "".join(f",,0,{name}\r\n" for name in sorted(SERIES_QUERY))
            head = "#group,false,false,false\r\n#datatype,string,long,string\r\n#default,_result,,\r\n"
            return 200, "text/csv", (head + ",result,table,_value\r\n" + names + "\r\n").encode()
        name = flux.split('r._measurement == "', 1)[1].split('"', 1)[0]
        query = SERIES_QUERY[name]
        body = annotated_csv(name, SERIES[query], (START, END, 60.0), lambda n, m, at: _value(query, m, at))
        return 200, "text/csv", body

    influx.answer = answer
    out = tmp_path / "report.html"
    argv = ["--influxdb.url", influx.url, "--influxdb.org", "ibpool", "--influxdb.token-file", str(token)]
    argv += [
        "--db",
        str(db),
        "--out",
        str(out),
        "--from",
        "2024-05-01T11:30:00Z",
        "--to",
        "2024-05-01T12:30:00Z",
    ]
    assert main(argv) == 0
    assert {r.headers["Authorization"] for r in influx.requests} == {f"Token {TOKEN}"}
    html = out.read_text()
    assert "InfluxDB 2 at http://127.0.0.1" in html
    effects = html[html.index('id="effects"') :]
    assert "<td>a</td><td>pending GPUs</td><td class=num>16</td><td class=num>0</td>" in effects
    alerts = html[html.index('id="alerts"') : html.index('id="pools"')]
    assert "ALERTS in InfluxDB 2 at" in alerts
    assert '<td class="severity sev-critical">critical</td><td>node0024 GPU 3</td>' in alerts
    links = html[html.index('id="links"') : html.index('id="faults"')]
    assert links.index("spine01/2") < links.index("node0001/mlx5_0/1")


@needs_engine
@pytest.mark.integration
def test_the_rules_replay_over_an_influxdb2_bucket(influx: FakeInflux) -> None:
    """The replay's copy reads the bucket through the same interface: vmalert fires from its series."""
    recorded_series = pools(2, 12)  # pool a queues 16 GPUs for 50 minutes while b has idle GPUs
    by_name: dict[str, list[dict[str, Any]]] = {}
    for item in recorded_series:
        by_name.setdefault(item["metric"]["__name__"], []).append(item)

    def sample(name: str, labels: dict[str, str], at: float) -> float | None:
        """The value of the window (at - 60 s, at], as aggregateWindow(every: 60s, fn: last) stamps it."""
        for item in by_name[name]:
            if all(item["metric"].get(k) == v for k, v in labels.items()):
                for ms, value in zip(item["timestamps"], item["values"], strict=True):
                    if at - 60 <= ms / 1000 < at:
                        return float(value)
        return None

    def answer(flux: str) -> tuple[int, str, bytes]:
        if "schema.measurements" in flux:
            names = "".join(f",,0,{name}\r\n" for name in sorted(by_name))
            head = "#group,false,false,false\r\n#datatype,string,long,string\r\n#default,_result,,\r\n"
            return 200, "text/csv", (head + ",result,table,_value\r\n" + names + "\r\n").encode()
        name = flux.split('r._measurement == "', 1)[1].split('"', 1)[0]
        start, stop = (
            datetime.fromisoformat(flux.split(f"{key}: ", 1)[1].split(",", 1)[0].split(")", 1)[0]).timestamp()
            for key in ("start", "stop")
        )
        tags = [{k: v for k, v in i["metric"].items() if k != "__name__"} for i in by_name.get(name, [])]
        return 200, "text/csv", annotated_csv(name, tags, (start, stop, 60.0), sample)

    influx.answer = answer
    store = source(influx)
    try:
        replayed = replay_window(store, RuleSet.load([ALERTS]), T0_REPLAY, T0_REPLAY + 36 * STEP, series=True)
    finally:
        store.close()
    assert sorted(replayed.copied) == sorted(by_name)
    assert [(a.name, a.severity, a.labels["pool"]) for a in replayed.alerts] == [
        ("GpuPoolImbalanced", "warning", "a")
    ]
    assert replayed.series is not None and max(v for _, v in replayed.series.pending["a"]) == 16.0
