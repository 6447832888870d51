"""`ibpool postmortem`'s settings: its options, its frozen config and the checks between them.

Loaded once by `foundation.settings.CommandSettings` (flags over an optional `--config.file` YAML file);
every problem, the options that depend on each other included, comes back in one `ConfigError`. Times
and durations stay as given (the flags' text) and are checked here, so the properties that parse them
cannot fail after loading. `--rules` is repeatable and a flag only (not a YAML key). docs/postmortem.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.settings import Bad, CommandSettings, Option
from postmortem.model import InputError, parse_duration, parse_time

PROG = "ibpool postmortem"

USAGE = """\
ibpool postmortem --run DIR [--from T --to T | --alert NAME [--margin 30m]] [--rules PATH] --out report.html
ibpool postmortem --prometheus.url URL --db ibpool.db [--from T --to T] [--alert NAME] [--rules PATH]
                  --out FILE
ibpool postmortem --influxdb.url URL [--influxdb.org ORG] [--influxdb.bucket B] [--influxdb.token-file F]
                  --db ibpool.db [...]
links: [--runbook.url URL] [--grafana.url URL] [--prometheus.link-url URL]
any of them from a YAML file: [--config.file FILE] (flags given win)
"""

DESCRIPTION = (
    "Write a self-contained HTML post-mortem report (plots, timeline, effect of each change). T: RFC 3339 "
    "or Unix seconds. With --alert the window runs from the alert's first firing less the margin to its "
    "last resolution plus the margin; --from/--to then only bound the search."
)


@dataclass(frozen=True)
class PostmortemConfig:
    """What to report on, from where, and where the report goes (frozen; checked by `validate`)."""

    run: Path | None = None
    prometheus_url: str | None = None
    influxdb_url: str | None = None
    influxdb_org: str = ""
    influxdb_bucket: str = "ibpool"
    influxdb_token_file: Path | None = None
    db: Path | None = None
    start: str | None = None
    end: str | None = None
    alert: str | None = None
    margin: str = "30m"
    out: Path | None = None
    top: int = 6
    step: str = "60s"
    effect_window: str = "10m"
    title: str = "ibpool post-mortem"
    rules: tuple[Path, ...] = ()
    runbook_url: str | None = None
    grafana_url: str | None = None
    prometheus_link_url: str | None = None
    log_level: str = "info"

    @property
    def bounds(self) -> tuple[float, float] | None:
        """`--from`/`--to` as Unix seconds, or None when neither is given."""
        if self.start is None or self.end is None:
            return None
        return parse_time(self.start), parse_time(self.end)

    @property
    def margin_seconds(self) -> float:
        """`--margin` in seconds."""
        return parse_duration(self.margin)

    @property
    def step_seconds(self) -> float:
        """`--step` in seconds."""
        return parse_duration(self.step)

    @property
    def effect_window_seconds(self) -> float:
        """`--effect-window` in seconds."""
        return parse_duration(self.effect_window)


OPTIONS: tuple[Option, ...] = (
    Option("--run", "run", "run", Path, "a demo run directory (ibpool demo --out DIR)"),
    Option("--prometheus.url", "prometheus.url", "prometheus_url", str,
           "a PromQL HTTP API base URL: Prometheus, or a long-term store such as VictoriaMetrics"),
    Option("--influxdb.url", "influxdb.url", "influxdb_url", str, "an InfluxDB 2 base URL (Flux queries)"),
    Option("--influxdb.org", "influxdb.org", "influxdb_org", str, "with --influxdb.url: org"),
    Option("--influxdb.bucket", "influxdb.bucket", "influxdb_bucket", str, "with --influxdb.url (ibpool)"),
    Option("--influxdb.token-file", "influxdb.token_file", "influxdb_token_file", Path,
           "with --influxdb.url: API token"),
    Option("--db", "db", "db", Path, "the proposal store (with --prometheus.url or --influxdb.url)"),
    Option("--from", "from", "start", str, "window start"),
    Option("--to", "to", "end", str, "window end"),
    Option("--alert", "alert", "alert", str, "centre the window on this alert's firing"),
    Option("--margin", "margin", "margin", str, "with --alert: time before and after (default 30m)"),
    Option("--out", "out", "out", Path, "the HTML file to write (required)"),
    Option("--top", "top", "top", int, "how many congested links to show (default 6)"),
    Option("--step", "step", "step", str, "with a store: query_range step (default 60s)"),
    Option("--effect-window", "effect_window", "effect_window", str,
           "with a store: the window before and after each change (default 10m)"),
    Option("--title", "title", "title", str, "the report's title (ibpool post-mortem)"),
    Option("--runbook.url", "runbook.url", "runbook_url", str,
           "base URL of the runbooks (<URL>/<Alert>.md); default: relative links to alerts/runbooks"),
    Option("--grafana.url", "grafana.url", "grafana_url", str, "Grafana base URL for panel links"),
    Option("--prometheus.link-url", "prometheus.link_url", "prometheus_link_url", str,
           "Prometheus base URL for query links (default: --prometheus.url when given)"),
)  # fmt: skip

FLAGS = {o.field: o.flag for o in OPTIONS}
_TEXT_KEYS = ("from", "to", "margin", "step", "effect_window")


def normalise(flat: dict[str, Any]) -> None:
    """YAML reads `from: 2024-05-01T10:00:00Z` as a datetime and `step: 60` as a number: give them back
    as the text the flags take."""
    for key in _TEXT_KEYS:
        value = flat.get(key)
        if isinstance(value, datetime.date):  # a datetime too; without a zone it is UTC, as parse_time has it
            flat[key] = value.isoformat()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[key] = str(value)


def _duration(cfg: PostmortemConfig, field: str, bad: Bad, *, positive: bool) -> None:
    text = getattr(cfg, field)
    try:
        seconds = parse_duration(text)
    except InputError as exc:
        bad(field, f"{FLAGS[field]}: {exc}")
        return
    if not math.isfinite(seconds) or (positive and seconds <= 0):
        bad(field, f"{FLAGS[field]}: must be a finite duration{' above 0' if positive else ''}: {text!r}")


def _window(cfg: PostmortemConfig, bad: Bad) -> None:
    if (cfg.start is None) != (cfg.end is None):
        bad("start" if cfg.start is not None else "end", "--from and --to go together")
    parsed: dict[str, float] = {}
    for field, text in (("start", cfg.start), ("end", cfg.end)):
        if text is None:
            continue
        try:
            parsed[field] = parse_time(text)
        except InputError as exc:
            bad(field, f"{FLAGS[field]}: {exc}")
    if len(parsed) == 2 and parsed["end"] <= parsed["start"]:
        bad("end", "--to must be after --from")


def _sources(cfg: PostmortemConfig, bad: Bad) -> None:
    stores = [field for field in ("prometheus_url", "influxdb_url") if getattr(cfg, field)]
    if cfg.run is not None:
        for field in (*stores, *(["db"] if cfg.db is not None else [])):
            bad(field, f"--run reads its own store; {FLAGS[field]} is not for it")
        if not cfg.run.is_dir():
            bad("run", f"no run directory at {cfg.run}")
        return
    if not stores:
        bad("run", "give --run DIR, or --prometheus.url URL or --influxdb.url URL with --db FILE")
        return
    if len(stores) > 1:
        bad("influxdb_url", "one store at a time: --prometheus.url or --influxdb.url")
    if cfg.db is None:
        bad("db", "a store needs --db (the proposal store with the audit log)")
    elif not cfg.db.is_file():
        bad("db", f"no proposal store at {cfg.db}")
    token = cfg.influxdb_token_file
    if cfg.influxdb_url and token is not None and not token.is_file():
        bad("influxdb_token_file", f"file not found: {token}")


def validate(cfg: PostmortemConfig, bad: Bad) -> None:
    """Every problem with the settings at once: the source, the window, the durations, the output."""
    _sources(cfg, bad)
    _window(cfg, bad)
    _duration(cfg, "margin", bad, positive=False)
    _duration(cfg, "step", bad, positive=True)
    _duration(cfg, "effect_window", bad, positive=True)
    if cfg.alert is not None and not cfg.alert.strip():
        bad("alert", "--alert: must name an alert")
    if cfg.out is None:
        bad("out", "give --out FILE (the HTML file to write)")


SETTINGS = CommandSettings(
    prog=PROG,
    description=DESCRIPTION,
    config_type=PostmortemConfig,
    options=OPTIONS,
    validate=validate,
    normalise=normalise,
    config_hidden=("--config",),
)


def parser() -> argparse.ArgumentParser:
    """Every flag: the options, `--config.file` (also `--config`) and the repeatable `--rules`."""
    p = SETTINGS.parser()
    p.usage = USAGE
    p.add_argument(
        "--rules",
        type=Path,
        action="append",
        default=[],
        help="rule files or directories to replay over the window (vmalert): what they would have fired",
    )
    return p


def load(argv: list[str]) -> PostmortemConfig:
    """Flags over the YAML file, checked; ConfigError lists every problem (SystemExit on a usage error)."""
    args = parser().parse_args(argv)
    cfg = SETTINGS.load([], args)
    return dataclasses.replace(cfg, rules=tuple(args.rules))
