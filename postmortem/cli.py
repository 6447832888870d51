"""`ibpool postmortem`: a self-contained HTML report of a window, from a demo run directory or Prometheus.

`--rules FILE|DIR` (repeatable) replays those rule files with vmalert over the source's series in the
window and shows what they fire ("would this rule have fired"): an operator's own rule changes, or the
shipped rules over a window of a live system. Links: `--runbook.url` (default: relative links to this
repository's alerts/runbooks), `--grafana.url`, `--prometheus.link-url` (default: `--prometheus.url`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from postmortem import alerts as alert_views
from postmortem import prometheus, rundir
from postmortem.links import LinkSettings
from postmortem.model import InputError, RunData, clock, parse_duration, parse_time
from postmortem.report import render

USAGE = """\
ibpool postmortem --run DIR [--from T --to T | --alert NAME [--margin 30m]] [--rules PATH] --out report.html
ibpool postmortem --prometheus.url URL --db ibpool.db [--from T --to T] [--alert NAME] [--rules PATH]
                  --out FILE
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
    parser.add_argument("--prometheus.url", dest="prometheus_url", help="a Prometheus HTTP API base URL")
    parser.add_argument("--db", type=Path, help="the proposal store (with --prometheus.url)")
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


def _load(args: argparse.Namespace) -> tuple[RunData, tuple[float, float] | None]:
    bounds = None
    if args.start is not None or args.end is not None:
        if args.start is None or args.end is None:
            raise InputError("--from and --to go together")
        bounds = (parse_time(args.start), parse_time(args.end))
        if bounds[1] <= bounds[0]:
            raise InputError("--to must be after --from")
    if args.run is not None:
        if args.prometheus_url or args.db:
            raise InputError("--run reads its own store; --prometheus.url and --db are for the other source")
        loaded = rundir.load(args.run)
        if args.rules:
            rundir.replay_with(args.run, loaded, list(args.rules))
        return loaded, bounds
    if not args.prometheus_url:
        raise InputError("give --run DIR or --prometheus.url URL with --db FILE")
    if args.db is None:
        raise InputError("--prometheus.url needs --db (the proposal store with the audit log)")
    if not args.db.is_file():
        raise InputError(f"no proposal store at {args.db}")
    if bounds is None:
        now = time.time()
        bounds = (now - 3600.0, now)
    source = prometheus.PrometheusSource(
        prometheus.http_fetch(args.prometheus_url), parse_duration(args.step)
    )
    data = source.load(*bounds)
    data.source = f"Prometheus {args.prometheus_url} and store {args.db}"
    events, effects = prometheus.audit_events(args.db, data, parse_duration(args.effect_window))
    data.events += events
    data.effects = effects
    if args.rules:
        ruleset = alert_views.load_rules(list(args.rules))
        replayed = alert_views.replay_promql(source.fetch, ruleset, *bounds)
        data.events = [e for e in data.events if e.kind not in ("alert", "resolved")]
        data.events += alert_views.events(replayed)
        data.alerts = replayed
        names = ", ".join(str(p) for p in args.rules)
        data.alert_source = f"would have fired: replayed by vmalert from {names} over {args.prometheus_url}"
    return data, bounds


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
