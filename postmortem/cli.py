"""`ibpool postmortem`: a self-contained HTML report of a window, from a demo run directory or Prometheus."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from postmortem import prometheus, rundir
from postmortem.model import InputError, RunData, parse_duration, parse_time, rfc3339
from postmortem.report import render

USAGE = """\
ibpool postmortem --run DIR [--from T --to T | --alert NAME [--margin 30m]] --out report.html
ibpool postmortem --prometheus.url URL --db ibpool.db [--from T --to T] [--alert NAME] --out FILE
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
        return rundir.load(args.run), bounds
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
        html = render(data, window, top=max(args.top, 1), title=args.title)
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(html, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    except InputError as exc:
        print(f"ibpool postmortem: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({rfc3339(window[0])} to {rfc3339(window[1])})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
