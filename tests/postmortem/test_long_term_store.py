"""A post-mortem of an incident 60 days old, from the long-term store alone (no Prometheus anywhere).

The scripted incident (tests/postmortem/incident.py) goes through the exporter's real pusher (line
protocol, influxdb-client's write, `--influx.labels` target labels) into a real VictoriaMetrics run with
the long-term store's flags; a proposal store holds the change applied in the middle of it. Then
`ibpool postmortem --prometheus.url <VictoriaMetrics>` writes the report: the store holds only raw series,
so the shipped rules are replayed by vmalert over them (the alerts, and the pool and congestion series),
the change's effect is measured on those, and headless Chromium opens the report and its runbook links.
With `--rules`, an operator's changed rule is replayed over the same old window: what it would have fired.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from exporter.influx.config import push_settings
from exporter.influx.pusher import InfluxPusher
from exporter.influx.settings import PushSettings
from postmortem.cli import main
from simulator.backends import victoria_metrics
from simulator.backends.victoria_metrics import LONG_TERM_ARGS, VICTORIA_METRICS, VictoriaMetrics
from tests.postmortem import incident
from tests.postmortem.browser import CHROMIUM, Browser
from tests.proposals.factory import FakeClock, open_store, proposal, vl_weights_doc

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        VICTORIA_METRICS is None or shutil.which("vmalert") is None,
        reason="needs victoria-metrics and vmalert (Debian package victoria-metrics)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
DAYS_AGO = 60
STEP = 30.0  # seconds between the pushed collections
PUSH_FROM, WINDOW = -30 * 60.0, 2 * 3600.0


@dataclass
class Pushed:
    vm: VictoriaMetrics
    start: float  # the report window's start, DAYS_AGO days back, on the hour
    points: int


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def push_incident(vm: VictoriaMetrics, start: float, spill: Path) -> int:
    """Every exporter's collections of the incident through its own pusher; the points written."""
    sources = {name: name for nodes in incident.POOLS.values() for name in nodes} | {"scheduler": None}
    written = 0
    for key, node in sources.items():
        settings = push_settings(
            PushSettings(url=vm.url, labels=incident.targets(node), spill_directory=spill / key)
        )
        assert settings is not None
        pusher = InfluxPusher(settings, list)
        pusher.start(sample=False)
        offered = 0
        t = PUSH_FROM
        while t <= WINDOW:
            families = incident.node(node, t) if node is not None else incident.scheduler(t)
            offered += pusher.offer(families, round((start + t) * 1e9))
            t += STEP
        assert pusher.buffer.wait_idle(60.0)
        pusher.close()
        assert pusher.stats.snapshot().written == offered
        assert set(pusher.buffer.state().dropped.values()) == {0}
        written += offered
    return written


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    start = (time.time() - DAYS_AGO * 86400) // 3600 * 3600
    with victoria_metrics.running(extra_args=LONG_TERM_ARGS) as vm:
        points = push_incident(vm, start, tmp_path_factory.mktemp("spill"))
        vm.flush()
        yield Pushed(vm, start, points)


@pytest.fixture(scope="module")
def store_db(pushed: Pushed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The proposal store: a set_vl_weights change proposed, approved and applied inside the window."""
    db = tmp_path_factory.mktemp("store") / "ibpool.db"
    clock = FakeClock(datetime.fromtimestamp(pushed.start + 50 * 60, UTC))
    doc = vl_weights_doc(
        created_at=_iso(pushed.start + 50 * 60),
        expires_at=_iso(pushed.start + 5 * 3600),
        expected_effect="node0002 mlx5_0 port 1 wait below 10%",
    )
    with open_store(db, clock) as store:
        stored, _ = store.submit(proposal(doc), proposer="policy:bandwidth-quota")
        clock.advance(minutes=10)
        store.transition(stored.id, "approved", "alice", "congested for 30 minutes")
        clock.now = datetime.fromtimestamp(pushed.start + incident.APPLY_AT, UTC)
        store.transition(stored.id, "applying", "ibpool-apply", "apply started")
        store.transition(stored.id, "applied", "ibpool-apply", "applied and verified")
    return db


def _report(pushed: Pushed, db: Path, out: Path, *extra: str) -> str:
    argv = ["--prometheus.url", pushed.vm.url, "--db", str(db), "--out", str(out)]
    argv += ["--from", _iso(pushed.start), "--to", _iso(pushed.start + WINDOW), *extra]
    assert main(argv) == 0
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def report(pushed: Pushed, store_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    _report(pushed, store_db, out)
    return out


def _section(html: str, name: str) -> str:
    start = html.index(f'id="{name}"')
    end = html.find('<h2 id="', start + 1)
    return html[start : end if end > 0 else len(html)]


ALERT_ROW = re.compile(r'<tr class="alert sev-(\w+)"><td><a class="runbook" href="[^"]*">(\w+)</a>(.*?)</tr>')
EVENT_ROW = re.compile(
    r'<tr class="ev ev-(\w+)"><td class=time>([^<]+)</td><td class="k-\w+">\w+</td><td>([^<]*)</td>'
)


def _alert_rows(html: str) -> dict[tuple[str, str], str]:
    """(alert, severity) -> the rest of its row, from the alerts table."""
    return {(name, severity): rest for severity, name, rest in ALERT_ROW.findall(_section(html, "alerts"))}


def _minutes(html: str, kind: str, what: str, start: float) -> list[float]:
    """Minutes from the window's start of the timeline's `kind` events whose text starts with `what`."""
    return [
        (datetime.strptime(at, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp() - start) / 60
        for k, at, text in EVENT_ROW.findall(_section(html, "timeline"))
        if k == kind and text.startswith(what)
    ]


def test_the_store_keeps_what_was_pushed_60_days_late(pushed: Pushed) -> None:
    counted = pushed.vm.query(
        'count_over_time(ibpool_infiniband_port_transmit_wait_total{node="node0002"}[3h])',
        at=pushed.start + WINDOW,
    )
    assert [(r["metric"]["instance"], r["metric"]["job"], float(r["value"][1])) for r in counted] == [
        ("node0002", "ibpool-node", (WINDOW - PUSH_FROM) / STEP + 1)
    ]


def test_without_the_long_term_flags_the_same_write_is_acknowledged_and_dropped(tmp_path: Path) -> None:
    start = (time.time() - DAYS_AGO * 86400) // 3600 * 3600
    with victoria_metrics.running() as vm:  # VictoriaMetrics' default retention: one month
        settings = push_settings(PushSettings(url=vm.url, labels=incident.targets("node0002")))
        assert settings is not None
        pusher = InfluxPusher(settings, list)
        pusher.start(sample=False)
        offered = pusher.offer(incident.node("node0002", 0.0), round(start * 1e9))
        assert pusher.buffer.wait_idle(30.0)
        pusher.close()
        assert pusher.stats.snapshot().written == offered  # the server said 204
        vm.flush()
        assert vm.samples('{__name__=~"ibpool_.*"}') == {}


def test_the_report_shows_the_congestion_the_replayed_alerts_and_the_applied_change(
    pushed: Pushed, report: Path
) -> None:
    html = report.read_text(encoding="utf-8")
    day = datetime.fromtimestamp(pushed.start, UTC)
    assert day < datetime.now(UTC) - timedelta(days=DAYS_AGO - 1)
    assert f"Window: <b>{day:%Y-%m-%d %H:%M}</b>" in html
    assert "pool and congestion series computed from its raw series by the replay" in html

    links = _section(html, "links")
    assert links.index("node0002/mlx5_0/1") < links.index("node0001/mlx5_0/1")  # the most congested first

    source = _section(html, "alerts").split('id="alert-source">', 1)[1].split("</p>", 1)[0]
    assert "replayed by vmalert from the shipped rules" in source and "holds no ALERTS" in source
    rows = _alert_rows(html)
    assert set(rows) == {
        ("IbPortCongested", "critical"),
        ("IbPortCongested", "warning"),
        ("GpuPoolImbalanced", "warning"),
    }
    assert "node0002/mlx5_0/1" in rows[("IbPortCongested", "critical")]
    assert "pool hi" in rows[("GpuPoolImbalanced", "warning")]

    timeline = _section(html, "timeline")
    assert "approved by alice" in timeline and "applied: applied and verified" in timeline
    effects = _section(html, "effects")
    assert "opensm.vlarb_low" in effects
    # pool hi: 8 GPUs pending in the 10 minutes before the apply, fewer after it (resolved 2 minutes in)
    pending = effects.split("<td>hi</td><td>pending GPUs</td>", 1)[1].split("</tr>", 1)[0]
    before, after = (float(cell.split("<", 1)[0]) for cell in pending.split("<td class=num>")[1:3])
    assert before == 8 and after < 4


def test_alerts_fire_and_resolve_when_the_rules_say(pushed: Pushed, report: Path) -> None:
    """Minutes from the window's start: the incident runs from 30 to 72; `for:` 10m and 15m."""
    html = report.read_text(encoding="utf-8")
    assert _minutes(html, "alert", "GpuPoolImbalanced warning pool hi", pushed.start) == [45]
    assert _minutes(html, "resolved", "GpuPoolImbalanced warning pool hi", pushed.start) == [72]
    # rate()[5m] crosses 10 % (warning) and 30 % (critical) one and three minutes into the congestion
    (warning,) = _minutes(html, "alert", "IbPortCongested warning node0002/mlx5_0/1", pushed.start)
    (critical,) = _minutes(html, "alert", "IbPortCongested critical node0002/mlx5_0/1", pushed.start)
    assert 40 <= warning < critical <= 44
    (resolved,) = _minutes(html, "resolved", "IbPortCongested critical node0002/mlx5_0/1", pushed.start)
    assert 72 < resolved <= 77


def test_todays_rules_over_the_old_window_say_what_would_have_fired(
    pushed: Pushed, store_db: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    shutil.copy(REPO / "alerts" / "recording_rules.yml", rules)
    text = (REPO / "alerts" / "alert_rules.yml").read_text(encoding="utf-8")
    assert text.count(") > 0.30\n") == 1
    (rules / "alert_rules.yml").write_text(text.replace(") > 0.30\n", ") > 0.60\n"), encoding="utf-8")
    html = _report(pushed, store_db, tmp_path / "report.html", "--rules", str(rules))
    source = _section(html, "alerts").split('id="alert-source">', 1)[1].split("</p>", 1)[0]
    assert source.startswith("would have fired: replayed by vmalert from ") and str(rules) in source
    assert set(_alert_rows(html)) == {("IbPortCongested", "warning"), ("GpuPoolImbalanced", "warning")}


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's `chromium` package (/usr/bin/chromium)")
def test_in_headless_chromium_the_report_renders_and_its_runbooks_resolve(report: Path) -> None:
    with Browser(width=1280, height=1600) as browser:
        browser.open(report.resolve().as_uri())
        rows = browser.evaluate("[...document.querySelectorAll('table.alerts tr')].length")
        assert rows == 4  # the header and three alerts
        charts = browser.evaluate(
            "[...document.querySelectorAll('svg')].filter(s => s.getBoundingClientRect().width > 100).length"
        )
        assert charts >= 3  # utilization, queue and congestion, drawn
        text = browser.evaluate("document.body.innerText")
        assert "node0002/mlx5_0/1" in text and "opensm.vlarb_low" in text
        links = browser.evaluate("[...document.querySelectorAll('table.alerts a.runbook')].map(a => a.href)")
        books = (REPO / "alerts" / "runbooks").resolve().as_uri() + "/"
        names = sorted({url.removeprefix(books) for url in links})
        assert names == ["GpuPoolImbalanced.md", "IbPortCongested.md"]
        for url in sorted(set(links)):
            browser.open(url)
            name = url.removeprefix(books).removesuffix(".md")
            assert browser.evaluate("document.body.innerText").startswith(f"# {name}")
