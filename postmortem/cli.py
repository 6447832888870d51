"""`ibpool postmortem`: a self-contained HTML report of a window, from a demo run directory or a store.

Stores: any PromQL endpoint (`--prometheus.url`: Prometheus, or a long-term store such as VictoriaMetrics)
or an InfluxDB 2 bucket (`--influxdb.url`, Flux), with the proposal store (`--db`). `--rules FILE|DIR`
(repeatable) replays those rule files with vmalert over the source's series in the window and shows what
they fire ("would this rule have fired"): an operator's own rule changes, or today's rules over a window
of months ago. Without `--rules`, a store that holds no ALERTS or no recorded series for the window (a
long-term store fed only by the exporters' push) gets the shipped rules replayed over its raw series.
Links: `--runbook.url` (default: relative links to this repository's alerts/runbooks), `--grafana.url`,
`--prometheus.link-url` (default: `--prometheus.url`). The settings (flags over an optional YAML file) are
`postmortem.config`; usage and the file: docs/postmortem.md.
"""

from __future__ import annotations

import sys
import time

from foundation.errors import ConfigError
from foundation.logs import configure_logging
from foundation.service import config_failed
from postmortem import alerts as alert_views
from postmortem import live, rundir
from postmortem.config import PROG, PostmortemConfig, load
from postmortem.influxdb import FluxSource
from postmortem.links import LinkSettings
from postmortem.live_replay import replay_window
from postmortem.model import InputError, RunData, clock
from postmortem.prometheus import PromQLSource
from postmortem.report import render
from postmortem.source import SeriesSource


def alert_window(data: RunData, name: str, margin_s: float) -> tuple[float, float]:
    """From the first firing of `name` (any instance) less the margin to the last firing or resolution of any
    of its instances plus the margin."""
    fired = sorted(e.at for e in data.events if e.kind == "alert" and e.name == name)
    if not fired:
        seen = sorted({e.name for e in data.events if e.kind == "alert" and e.name})
        raise InputError(f"alert {name!r} never fired in the data; alerts seen: {', '.join(seen) or 'none'}")
    resolved = [e.at for e in data.events if e.kind == "resolved" and e.name == name and e.at >= fired[0]]
    return fired[0] - margin_s, max([*fired, *resolved]) + margin_s


def _load(cfg: PostmortemConfig) -> tuple[RunData, tuple[float, float] | None]:
    """The report's data and the `--from`/`--to` window; the sources were checked when `cfg` was loaded."""
    bounds = cfg.bounds
    if cfg.run is not None:
        loaded = rundir.load(cfg.run)
        if cfg.rules:
            rundir.replay_with(cfg.run, loaded, list(cfg.rules))
        return loaded, bounds
    if bounds is None:
        now = time.time()
        bounds = (now - 3600.0, now)
    source = _store_source(cfg)
    try:
        return _from_store(cfg, source, bounds), bounds
    finally:
        if isinstance(source, FluxSource):
            source.close()


def _store_source(cfg: PostmortemConfig) -> SeriesSource:
    if cfg.prometheus_url:
        return PromQLSource.at(cfg.prometheus_url)
    assert cfg.influxdb_url is not None  # validate() requires --run or one of the two stores
    token = ""
    if cfg.influxdb_token_file is not None:
        try:
            token = cfg.influxdb_token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"cannot read {cfg.influxdb_token_file}: {exc.strerror or exc}") from None
    return FluxSource(cfg.influxdb_url, cfg.influxdb_bucket, org=cfg.influxdb_org, token=token)


def _from_store(cfg: PostmortemConfig, source: SeriesSource, bounds: tuple[float, float]) -> RunData:
    """Series and alerts from the store; the rules replayed over it when asked (`--rules`) or when it
    holds no recorded series or no ALERTS for the window (the shipped rules then); the audit log."""
    assert cfg.db is not None  # validate() requires it with a store
    step = cfg.step_seconds
    data = live.load(source, *bounds, step)
    names = source.names(*bounds)
    has_series, has_alerts = bool(names & live.RECORDED), live.ALERTS.name in names
    data.source = f"{source.where} and store {cfg.db}"
    if cfg.rules or not has_series or not has_alerts:
        paths = list(cfg.rules) or [alert_views.SHIPPED_RULES]
        ruleset = alert_views.load_rules(paths)
        try:
            replayed = replay_window(source, ruleset, *bounds, step, series=not has_series)
        except InputError as exc:
            if cfg.rules:
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
            if cfg.rules:
                live.set_alerts(
                    data,
                    replayed.alerts,
                    f"would have fired: replayed by vmalert from {shown} over {source.where}",
                )
            elif not has_alerts:
                text = f"replayed by vmalert from the shipped rules ({shown}) over {source.where}"
                live.set_alerts(data, replayed.alerts, text + ", which holds no ALERTS for the window")
    events, effects = live.audit_events(cfg.db, data, cfg.effect_window_seconds)
    data.events += events
    data.effects = effects
    return data


def main(argv: list[str]) -> int:
    """Write the report; exit 2 for a bad configuration (every problem listed) and for missing or
    unreadable inputs."""
    try:
        cfg = load(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    except ConfigError as exc:
        return config_failed(PROG, exc.problems)
    configure_logging(cfg.log_level)
    assert cfg.out is not None  # validate() requires it
    try:
        data, bounds = _load(cfg)
        if cfg.alert:
            window = alert_window(data, cfg.alert, cfg.margin_seconds)
        elif bounds is not None:
            window = bounds
        else:
            span = data.span()
            if span is None:
                raise InputError("no series and no events to report on")
            window = span
        links = LinkSettings(
            report_dir=cfg.out.parent,
            runbook_url=cfg.runbook_url,
            grafana_url=cfg.grafana_url,
            prometheus_url=cfg.prometheus_link_url or cfg.prometheus_url,
        )
        html = render(data, window, top=max(cfg.top, 1), title=cfg.title, links=links)
        try:
            cfg.out.parent.mkdir(parents=True, exist_ok=True)
            cfg.out.write_text(html, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {cfg.out}: {exc.strerror or exc}") from None
    except InputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {cfg.out} ({clock(window[0])} to {clock(window[1])} UTC)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
