"""`ibpool postmortem` on a real `ibpool demo --fast` run directory (one run for the module, ~40 s): the
report's sections, its alerts from the rule replay (and what a broken rule file changes), one clock with
the console, and a headless Chromium that follows the runbook links and sees the regression in red."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from demo.cli import main as demo_main
from postmortem.cli import main
from postmortem.model import clock
from tests.postmortem.browser import CHROMIUM, Browser

REPO = Path(__file__).resolve().parents[2]
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}
SVG_LEAVES = {"rect", "line", "polyline", "circle", "text", "path"}


class Checker(HTMLParser):
    """Parses the report, checking that every element is closed in order; counts tags, keeps hrefs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: dict[str, int] = {}
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.ids.update(v for k, v in attrs if k == "id" and v)
        self.hrefs += [v for k, v in attrs if k == "href" and v]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag not in SVG_LEAVES:
            self.errors.append(f"self-closed <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("postmortem") / "run"
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        assert demo_main(["--fast", "--out", str(out)]) == 0
    return out, console.getvalue()


@pytest.fixture(scope="module")
def run_dir(demo_run: tuple[Path, str]) -> Path:
    return demo_run[0]


@pytest.fixture(scope="module")
def report(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["--run", str(run_dir), "--out", str(out)]) == 0
    return out


def _section(html: str, name: str) -> str:
    start = html.index(f'id="{name}"')
    following = [html.find('<h2 id="', start + 1)]
    return html[start : following[0] if following[0] > 0 else len(html)]


def _start(run_dir: Path) -> float:
    return float(json.loads((run_dir / "run.json").read_text())["start"])


@pytest.mark.slow
def test_report_contents(run_dir: Path, report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    assert {"window", "loop", "alerts", "pools", "links", "faults", "timeline", "effects"} <= checker.ids
    assert html.index('id="loop"') < html.index('id="alerts"') < html.index('id="pools"')
    assert checker.tags.get("svg", 0) >= 4
    assert checker.tags.get("polyline", 0) >= 4

    # self-contained: no script, no external asset; the only links are the runbooks (relative files)
    assert "<script" not in html
    assert not re.search(r"\bsrc=|@import|url\(", html, re.I)
    assert checker.hrefs
    assert all(not h.startswith(("http:", "https:", "//")) and h.endswith(".md") for h in checker.hrefs)

    loop = _section(html, "loop")
    assert "<td>GPU allocation, overall</td>" in loop
    assert "priority job recsys-allreduce-burst iteration (x alone)" in loop
    assert "static" in loop and "Both runs" in loop

    alerts = _section(html, "alerts")
    fired = json.loads((run_dir / "alerts.json").read_text())["firings"]
    assert alerts.count('<tr class="alert ') == len(fired)
    assert (
        "replayed by vmalert from the rule files as shipped (alert_rules.yml, recording_rules.yml)" in alerts
    )
    assert re.search(r'<td class="severity sev-critical">critical</td><td>leaf00\d/9</td>', alerts)
    assert "GpuFellOffBus" in alerts and "node0016 GPU 3" in alerts
    assert re.search(r"<td class=num>\d+ (min|h \d\d min)</td>", alerts)  # how long it fired

    faults = _section(html, "faults")
    assert "lose_gpu node0016/gpu3" in faults
    assert "GpuXidError" in faults
    assert "NodeUnavailable" not in html  # no alert that the rule files do not define

    timeline = json.loads((run_dir / "timeline.json").read_text())
    section = _section(html, "timeline")
    for event in timeline:
        if event["kind"] in ("fault", "proposal", "approval", "apply"):
            assert event["summary"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in section
    assert section.count('class="ev ev-proposal"') == sum(1 for e in timeline if e["kind"] == "proposal")
    assert section.count('class="ev ev-alert"') == len(fired)

    effects = _section(html, "effects")
    effects_json = json.loads((run_dir / "effects.json").read_text())
    assert effects.count('class="effect-table"') == len(effects_json)
    first = effects_json[0]["counterfactual"]["metrics"]["recsys"]["multinode_slowdown"]
    row = re.search(
        r"<td>recsys</td><td>multi-node slowdown</td><td class=num>([\d.]+)</td><td class=num>([\d.]+)</td>",
        effects,
    )
    assert row is not None
    assert float(row.group(1)) == pytest.approx(first[0], abs=1e-3)
    assert float(row.group(2)) == pytest.approx(first[1], abs=1e-3)
    assert "<th>without it</th><th>with it</th>" in effects
    assert 'class="regression-flag">Regression: llm multi-node slowdown' in effects
    assert '<tr class="regression"><td>llm</td><td>multi-node slowdown</td>' in effects
    moves = [e for e in effects_json if e["change"]["kind"] == "move_nodes"]
    if moves:  # node lists in hostlist notation, the moved nodes marked
        assert re.search(r"<code>node\[\d{4}[-,]", effects)
        assert re.search(r'<span class="moved moved-in">\+ node', effects)
        assert re.search(r"Moved: <b>\d nodes? node", effects)


@pytest.mark.slow
def test_times_are_shown_one_way(demo_run: tuple[Path, str], report: Path) -> None:
    run_dir, console = demo_run
    html = report.read_text(encoding="utf-8")
    timeline = json.loads((run_dir / "timeline.json").read_text())
    applied = [e for e in timeline if e["kind"] == "apply"]
    assert applied
    for event in applied:
        shown = clock(_start(run_dir) + event["t"])
        assert f"[{shown}] apply     {event['summary']}" in console  # the console's clock ...
        assert f'<td class=time>{shown}</td><td class="k-apply">apply</td>' in html  # ... is the report's
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", html)  # no second format


@pytest.mark.slow
def test_same_input_same_bytes(run_dir: Path, report: Path) -> None:
    again = report.with_name("again.html")  # beside it: the runbook links are relative to the report
    assert main(["--run", str(run_dir), "--out", str(again)]) == 0
    assert again.read_bytes() == report.read_bytes()


@pytest.mark.slow
def test_alert_window(run_dir: Path, tmp_path: Path) -> None:
    fired = [
        f
        for f in json.loads((run_dir / "alerts.json").read_text())["firings"]
        if f["name"] == "IbPortCongested"
    ]
    low = min(f["start"] for f in fired) - 120
    high = max(f["end"] or f["start"] for f in fired) + 120
    out = tmp_path / "alert.html"
    argv = ["--run", str(run_dir), "--alert", "IbPortCongested", "--margin", "2m", "--out", str(out)]
    assert main(argv) == 0
    html = out.read_text()
    assert f"Window: <b>{clock(low)}</b> to <b>{clock(high)}</b>" in html
    effects = _section(html, "effects")
    assert "set_vl_weights" in effects
    assert "move_nodes" not in effects


@pytest.mark.slow
def test_a_broken_rule_file_loses_its_alert(run_dir: Path, tmp_path: Path) -> None:
    rules = tmp_path / "alerts"
    shutil.copytree(REPO / "alerts", rules, ignore=shutil.ignore_patterns("tests", "runbooks", "external"))
    same = tmp_path / "same.html"
    assert main(["--run", str(run_dir), "--rules", str(rules), "--out", str(same)]) == 0
    alerts = _section(same.read_text(), "alerts")
    assert "would have fired: replayed by vmalert from" in alerts
    assert re.search(r">IbPortCongested</a></td>", alerts)

    text = (rules / "alert_rules.yml").read_text()
    assert text.count(") > 0.10\n") == 1 and text.count(") > 0.30\n") == 1
    broken = text.replace(") > 0.10\n", ") > 10\n").replace(") > 0.30\n", ") > 30\n")
    for threshold in ("0.10", "0.30"):
        broken = broken.replace(
            f"ratio_rate5m > {threshold}", f"ratio_rate5m > {threshold.replace('0.', '')}"
        )
    (rules / "alert_rules.yml").write_text(broken)
    out = tmp_path / "broken.html"
    assert main(["--run", str(run_dir), "--rules", str(rules), "--out", str(out)]) == 0
    alerts = _section(out.read_text(), "alerts")
    assert "IbPortCongested" not in alerts  # the demo's congestion alert is gone with its rule ...
    assert "GpuFellOffBus" in alerts  # ... and the others still fire


def test_unreadable_rules_are_refused(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("groups: [ {name: x, rules: [ {alert: A, expr: up == 0} ]\n")
    out = tmp_path / "r.html"
    assert main(["--run", str(run_dir), "--rules", str(bad), "--out", str(out)]) == 2
    assert "rules:" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_missing_inputs(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["--run", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "no run directory" in capsys.readouterr().err
    partial = tmp_path / "partial"
    shutil.copytree(run_dir, partial)
    (partial / "series" / "links.csv").unlink()
    assert main(["--run", str(partial), "--out", str(out)]) == 2
    assert "missing series/links.csv" in capsys.readouterr().err
    assert main(["--run", str(run_dir), "--alert", "NoSuchAlert", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "'NoSuchAlert' never fired" in err
    assert "IbPortCongested" in err
    assert main(["--run", str(run_dir), "--from", "2026-01-01T00:00:00Z", "--out", str(out)]) == 2
    assert "--from and --to go together" in capsys.readouterr().err
    assert main(["--run", str(run_dir), "--from", "yesterday", "--to", "now", "--out", str(out)]) == 2
    assert "not a time" in capsys.readouterr().err
    assert main(["--run", str(run_dir), "--alert", "X", "--margin", "soon", "--out", str(out)]) == 2
    assert "not a duration" in capsys.readouterr().err
    assert main(["--out", str(out)]) == 2
    assert "give --run DIR, or --prometheus.url" in capsys.readouterr().err
    assert main(["--run", str(run_dir)]) == 2  # --out is required
    assert "give --out FILE" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's `chromium` package (/usr/bin/chromium)")
def test_in_headless_chromium_runbooks_resolve_and_the_regression_is_red(report: Path) -> None:
    with Browser(width=1280, height=1600) as browser:
        browser.open(report.resolve().as_uri())
        links = browser.evaluate("[...document.querySelectorAll('table.alerts a.runbook')].map(a => a.href)")
        assert links
        books = (REPO / "alerts" / "runbooks").resolve().as_uri() + "/"
        for url in sorted(set(links)):
            assert url.startswith(books), url  # resolved by the browser into this repository's runbooks
            name = url.removeprefix(books).removesuffix(".md")
            browser.open(url)  # raises with the browser's reason (net::ERR_FILE_NOT_FOUND) if it does not
            assert browser.evaluate("document.body.innerText").startswith(f"# {name}")
        browser.open(report.resolve().as_uri())
        flag = browser.evaluate(
            "(() => { const e = document.querySelector('.effect .regression-flag'); e.scrollIntoView();"
            " const r = e.getBoundingClientRect(); const s = getComputedStyle(e);"
            " return {x: r.x + scrollX, y: r.y + scrollY, w: r.width, h: r.height, bg: s.backgroundColor,"
            " text: e.innerText, visible: s.visibility === 'visible' && s.display !== 'none'}; })()"
        )
        assert flag["visible"] and flag["w"] > 50 and flag["h"] > 8
        assert flag["bg"] == "rgb(204, 0, 0)"
        assert flag["text"].startswith("Regression: llm")
        png = browser.screenshot({"x": flag["x"], "y": flag["y"], "width": flag["w"], "height": flag["h"]})
        red = _share(png, lambda r, g, b: r > 180 and g < 60 and b < 60)
        assert red > 0.5  # drawn: mostly red pixels where the flag is
        row = browser.evaluate("getComputedStyle(document.querySelector('.effect tr.regression td')).color")
        assert row == "rgb(187, 0, 0)"


def _share(png: bytes, test: Callable[[int, int, int], bool]) -> float:
    """Share of the pixels of a PNG (8-bit RGB or RGBA, any filter) for which `test(r, g, b)` holds."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = (int(v) for v in struct.unpack(">IIBB", png[16:26]))
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    data, offset = b"", 8
    while offset < len(png):
        length = int.from_bytes(png[offset : offset + 4], "big")
        if png[offset + 4 : offset + 8] == b"IDAT":
            data += png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    raw = zlib.decompress(data)
    stride = width * channels
    previous = bytearray(stride)
    hits = 0
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        previous = line
        hits += sum(
            1
            for x in range(width)
            if test(line[x * channels], line[x * channels + 1], line[x * channels + 2])
        )
    return hits / (width * height)
