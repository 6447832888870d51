"""`ibpool postmortem` on a real `ibpool demo --fast` run directory (one run for the module, ~30 s)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from demo.cli import main as demo_main
from postmortem.cli import main
from postmortem.model import parse_time, rfc3339

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}
SVG_LEAVES = {"rect", "line", "polyline", "circle", "text", "path"}
CHROMIUM = Path("/usr/bin/chromium")  # Debian package `chromium`


class Checker(HTMLParser):
    """Parses the report, checking that every element is closed in order; counts tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: dict[str, int] = {}
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.ids.update(v for k, v in attrs if k == "id" and v)
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
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("postmortem") / "run"
    assert demo_main(["--fast", "--quiet", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def report(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["--run", str(run_dir), "--out", str(out)]) == 0
    return out


def _section(html: str, name: str) -> str:
    start = html.index(f'id="{name}"')
    following = [html.find('<h2 id="', start + 1)]
    return html[start : following[0] if following[0] > 0 else len(html)]


@pytest.mark.slow
def test_report_contents(run_dir: Path, report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    assert {"window", "pools", "links", "faults", "timeline", "effects"} <= checker.ids
    assert checker.tags.get("svg", 0) >= 3
    assert checker.tags.get("polyline", 0) >= 3

    # self-contained: no script, no external asset or URL
    assert "<script" not in html
    assert not re.search(r"https?:|//[a-z]|\bsrc=|\bhref=|@import|url\(", html, re.I)

    timeline = json.loads((run_dir / "timeline.json").read_text())
    start = parse_time(timeline[0]["time"]) - timeline[0]["t"]
    assert "Window: <b>" in html

    pools = _section(html, "pools")
    assert "<td>recsys</td>" in pools
    assert "<td>llm</td>" in pools

    links = _section(html, "links")
    assert links.count("<svg") >= 3
    assert re.search(r"<td>leaf00\d/9</td><td class=num>0\.4\d*</td>", links)

    faults = _section(html, "faults")
    assert "lose_gpu node0024/gpu3" in faults
    assert "NodeUnavailable" in faults

    section = _section(html, "timeline")
    for event in timeline:
        if event["kind"] in ("fault", "alert", "proposal", "approval", "apply"):
            assert event["summary"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in section
    assert section.count('class="ev ev-proposal"') == sum(1 for e in timeline if e["kind"] == "proposal")
    assert section.count('class="ev ev-apply"') == sum(1 for e in timeline if e["kind"] == "apply")

    effects = _section(html, "effects")
    effects_json = json.loads((run_dir / "effects.json").read_text())
    assert len(effects_json) >= 1
    assert effects.count('class="effect-table"') == len(effects_json)
    first = effects_json[0]
    slowdown = first["before"]["pools"]["recsys"]["slowdown"], first["after"]["pools"]["recsys"]["slowdown"]
    row = re.search(
        r"<td>recsys</td><td>multi-node slowdown</td><td class=num>([\d.]+)</td><td class=num>([\d.]+)</td>",
        effects,
    )
    assert row is not None
    assert float(row.group(1)) == pytest.approx(slowdown[0], abs=1e-3)
    assert float(row.group(2)) == pytest.approx(slowdown[1], abs=1e-3)
    assert first["change"]["proposal_id"][:12] in effects
    assert start > 0


@pytest.mark.slow
def test_same_input_same_bytes(run_dir: Path, report: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    assert main(["--run", str(run_dir), "--out", str(again)]) == 0
    assert again.read_bytes() == report.read_bytes()


@pytest.mark.slow
def test_alert_window(run_dir: Path, tmp_path: Path) -> None:
    timeline = json.loads((run_dir / "timeline.json").read_text())
    start = parse_time(timeline[0]["time"]) - timeline[0]["t"]
    fired = [
        e["t"] for e in timeline if e["kind"] == "alert" and e["detail"].get("alert") == "IbPortCongested"
    ]
    resolved = [
        e["t"] for e in timeline if e["kind"] == "resolved" and e["detail"].get("alert") == "IbPortCongested"
    ]
    out = tmp_path / "alert.html"
    assert (
        main(["--run", str(run_dir), "--alert", "IbPortCongested", "--margin", "2m", "--out", str(out)]) == 0
    )
    html = out.read_text()

    low, high = start + min(fired) - 120, start + max([*fired, *resolved]) + 120
    assert f"Window: <b>{rfc3339(low)}</b> to <b>{rfc3339(high)}</b>" in html
    # only what happened in the window: the quota changes, not the later node moves
    effects = _section(html, "effects")
    assert "set_vl_weights" in effects
    assert "move_nodes" not in effects
    assert "GpuPoolImbalanced" not in _section(html, "timeline")

    # --from/--to: the same window given explicitly
    explicit = tmp_path / "explicit.html"
    argv = ["--run", str(run_dir), "--from", rfc3339(low), "--to", str(high), "--out", str(explicit)]
    assert main(argv) == 0
    assert explicit.read_text() == html


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
    assert "give --run DIR or --prometheus.url" in capsys.readouterr().err
    assert main(["--run", str(run_dir)]) == 2  # --out is required (argparse usage error)
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's `chromium` package (/usr/bin/chromium)")
def test_screenshot_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    profile = tmp_path / "profile"
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        "--window-size=1280,2000",
        report.resolve().as_uri(),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)
    assert _distinct_colours(data) > 8  # not blank: text, lines and several colours were drawn


def _distinct_colours(png: bytes) -> int:
    """Distinct byte values in the first rows of the decoded image (8-bit RGB(A), any filter)."""
    offset, chunks = 8, []
    while offset < len(png):
        length = int.from_bytes(png[offset : offset + 4], "big")
        kind = png[offset + 4 : offset + 8]
        if kind == b"IDAT":
            chunks.append(png[offset + 8 : offset + 8 + length])
        offset += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    return len(set(raw[: 1280 * 4 * 400]))
