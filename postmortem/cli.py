"""`ibpool postmortem`: a self-contained HTML report of a window, from a demo run directory or a store.

Stores: any PromQL endpoint (`--prometheus.url`: Prometheus, or a long-term store such as VictoriaMetrics)
or an InfluxDB 2 bucket (`--influxdb.url`, Flux), with the proposal store (`--db`). `--rules FILE|DIR`
(repeatable) replays those rule files with vmalert over the source's series in the window and shows what
they fire ("would this rule have fired"): an operator's own rule changes, or today's rules over a window
of months ago. Without `--rules`, a store that holds no ALERTS or no recorded series for the window (a
long-term store fed only by the exporters' push) gets the shipped rules replayed over its raw series.
Links: `--runbook.url` (default: relative links to this repository's alerts/runbooks), `--grafana.url`,
`--prometheus.link-url` (default: `--prometheus.url`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from postmortem import alerts as alert_views
from postmortem import live, rundir
from postmortem.influxdb import FluxSource
from postmortem.links import LinkSettings
from postmortem.live_replay import replay_window
from postmortem.model import InputError, RunData, clock, parse_duration, parse_time
from postmortem.prometheus import PromQLSource
from postmortem.report import render
from postmortem.source import SeriesSource

USAGE = """\
ibpool postmortem --run DIR [--from T --to T | --alert NAME [--margin 30m]] [--rules PATH] --out report.html
ibpool postmortem --prometheus.url URL --db ibpool.db [--from T --to T] [--alert NAME] [--rules PATH]
                  --out FILE
ibpool postmortem --influxdb.url URL [--influxdb.org ORG] [--influxdb.bucket B] [--influxdb.token-file F]
                  --db ibpool.db [...]
links: [--runbook.url URL] [--grafana.url URL] [--prometheus.link-url URL]
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ibpool postmortem",
        usage=USAGE,
        description="Write a self-contained HTML post-mortem report (plots, timeline, effect of each "
        "change). T: RFC 3339 or Unix seconds. With --alert the window runs from the alert's first firing "
        "less the margin to its last resolution plus the margin; --from/--to then only bound the search.",
    )
    parser.add_argument("--run", type=Path, help="a demo run directory (ibpool demo --out DIR)")
    parser.add_argument(
        "--prometheus.url",
        dest="prometheus_url",
        help="a PromQL HTTP API base URL: Prometheus, or a long-term store such as VictoriaMetrics",
    )
    parser.add_argument("--influxdb.url", dest="influxdb_url", help="an InfluxDB 2 base URL (Flux queries)")
    parser.add_argument("--influxdb.org", dest="influxdb_org", default="", help="with --influxdb.url: org")
    parser.add_argument(
        "--influxdb.bucket", dest="influxdb_bucket", default="ibpool", help="with --influxdb.url (ibpool)"
    )
    parser.add_argument(
        "--influxdb.token-file", dest="influxdb_token_file", type=Path, help="with --influxdb.url: API token"
    )
    parser.add_argument(
        "--db", type=Path, help="the proposal store (with --prometheus.url or --influxdb.url)"
    )
    parser.add_argument("--from", dest="start", help="window start")
    parser.add_argument("--to", dest="end", help="window end")
    parser.add_argument("--alert", help="centre the window on this alert's firing")
    parser.add_argument("--margin", default="30m", help="with --alert: time before and after (default 30m)")
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--top", type=int, default=6, help="how many congested links to show (default 6)")
    parser.add_argument("--step", default="60s", help="with --prometheus.url: query_range step (default 60s)")
    parser.add_argument("--effect-window", default="10m", help="with --prometheus.url: before/after window")
    parser.add_argument("--title", default="ibpool post-mortem")
    parser.add_argument(
        "--rules",
        type=Path,
        action="append",
        default=[],
        help="rule files or directories to replay over the window (vmalert): what they would have fired",
    )
    parser.add_argument(
        "--runbook.url",
        dest="runbook_url",
        help="base URL of the runbooks (<URL>/<Alert>.md); default: relative links to alerts/runbooks",
    )
    parser.add_argument("--grafana.url", dest="grafana_url", help="Grafana base URL for panel links")
    parser.add_argument(
        "--prometheus.link-url",
        dest="prometheus_link_url",
        help="Prometheus base URL for query links (default: --prometheus.url when given)",
    )
    return parser


def alert_window(data: RunData, name: str, margin_s: float) -> tuple[float, float]:
    """From the first firing of `name` (any instance) less the margin to the last firing or resolution of any
    of its instances plus the margin."""
    fired = sorted(e.at for e in data.events if e.kind == "alert" and e.name == name)
    if not fired:
        seen = sorted({e.name for e in data.events if e.kind == "alert" and e.name})
        raise InputError(f"alert {name!r} never fired in the data; alerts seen: {', '.join(seen) or 'none'}")
    resolved = [e.at for e in data.events if e.kind == "resolved" and e.name == name and e.at >= fired[0]]
    return fired[0] - margin_s, max([*fired, *resolved]) + margin_s


def _bounds(args: argparse.Namespace) -> tuple[float, float] | None:
    if args.start is None and args.end is None:
        return None
    if args.start is None or args.end is None:
        raise InputError("--from and --to go together")
    bounds = (parse_time(args.start), parse_time(args.end))
    if bounds[1] <= bounds[0]:
        raise InputError("--to must be after --from")
    return bounds


def _load(args: argparse.Namespace) -> tuple[RunData, tuple[float, float] | None]:
    bounds = _bounds(args)
    stores = [u for u in (args.prometheus_url, args.influxdb_url) if u]
    if args.run is not None:
        if stores or args.db:
            raise InputError(
                "--run reads its own store; --prometheus.url, --influxdb.url and --db are not for it"
            )
        loaded = rundir.load(args.run)
        if args.rules:
            rundir.replay_with(args.run, loaded, list(args.rules))
        return loaded, bounds
    if not stores:
        raise InputError("give --run DIR, or --prometheus.url URL or --influxdb.url URL with --db FILE")
    if len(stores) > 1:
        raise InputError("one store at a time: --prometheus.url or --influxdb.url")
    if args.db is None:
        raise InputError("a store needs --db (the proposal store with the audit log)")
    if not args.db.is_file():
        raise InputError(f"no proposal store at {args.db}")
    if bounds is None:
        now = time.time()
        bounds = (now - 3600.0, now)
    source = _store_source(args)
    try:
        return _from_store(args, source, bounds), bounds
    finally:
        if isinstance(source, FluxSource):
            source.close()


def _store_source(args: argparse.Namespace) -> SeriesSource:
    if args.prometheus_url:
        return PromQLSource.at(args.prometheus_url)
    token = ""
    if args.influxdb_token_file is not None:
        try:
            token = args.influxdb_token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"cannot read {args.influxdb_token_file}: {exc.strerror or exc}") from None
    return FluxSource(args.influxdb_url, args.influxdb_bucket, org=args.influxdb_org, token=token)


def _from_store(args: argparse.Namespace, source: SeriesSource, bounds: tuple[float, float]) -> RunData:
    """Series and alerts from the store; the rules replayed over it when asked (`--rules`) or when it
    holds no recorded series or no ALERTS for the window (the shipped rules then); the audit log."""
    step = parse_duration(args.step)
    data = live.load(source, *bounds, step)
    names = source.names(*bounds)
    has_series, has_alerts = bool(names & live.RECORDED), live.ALERTS.name in names
    data.source = f"{source.where} and store {args.db}"
    if args.rules or not has_series or not has_alerts:
        paths = list(args.rules) or [alert_views.SHIPPED_RULES]
        ruleset = alert_views.load_rules(paths)
        try:
            replayed = replay_window(source, ruleset, *bounds, step, series=not has_series)
        except InputError as exc:
            if args.rules:
                raise
            if not has_alerts:
                data.alert_source = f"no ALERTS in {source.where} for the window, and {exc}"
            if not has_series:
                data.source += f" (no recorded series for the window, and {exc})"
        else:
            if replayed.series is not None:
                data.utilization = replayed.series.utilization
                data.pending = replayed.series.pending
                data.congestion = replayed.series.congestion
                data.source += " (pool and congestion series computed from its raw series by the replay)"
            shown = ", ".join(str(p) for p in paths)
            if args.rules:
                live.set_alerts(
                    data,
                    replayed.alerts,
                    f"would have fired: replayed by vmalert from {shown} over {source.where}",
                )
            elif not has_alerts:
                text = f"replayed by vmalert from the shipped rules ({shown}) over {source.where}"
                live.set_alerts(data, replayed.alerts, text + ", which holds no ALERTS for the window")
    events, effects = live.audit_events(args.db, data, parse_duration(args.effect_window))
    data.events += events
    data.effects = effects
    return data


def main(argv: list[str]) -> int:
    """Write the report; exit 2 for usage errors and missing or unreadable inputs."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    try:
        margin = parse_duration(args.margin)
        data, bounds = _load(args)
        if args.alert:
            window = alert_window(data, args.alert, margin)
        elif bounds is not None:
            window = bounds
        else:
            span = data.span()
            if span is None:
                raise InputError("no series and no events to report on")
            window = span
        links = LinkSettings(
            report_dir=args.out.parent,
            runbook_url=args.runbook_url,
            grafana_url=args.grafana_url,
            prometheus_url=args.prometheus_link_url or args.prometheus_url,
        )
        html = render(data, window, top=max(args.top, 1), title=args.title, links=links)
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(html, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    except InputError as exc:
        print(f"ibpool postmortem: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({clock(window[0])} to {clock(window[1])} UTC)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
