"""`ibpool postmortem`: given a window (or an alert and a margin), a self-contained HTML report.

    ibpool postmortem --run DIR [--from T --to T | --alert NAME [--margin 30m]] [--rules PATH] --out FILE
    ibpool postmortem --prometheus.url URL --db ibpool.db [--from T --to T] [--alert NAME] [--rules PATH]
                      --out FILE
    ibpool postmortem --influxdb.url URL [--influxdb.org ORG --influxdb.bucket B --influxdb.token-file F]
                      --db ibpool.db ...
    links: [--runbook.url URL] [--grafana.url URL] [--prometheus.link-url URL]   (python -m postmortem.cli)

Sources (`RunData` in `postmortem.model`):
- a demo run directory (`postmortem.rundir`): its series, timeline, the alerts the shipped rules fired in
  the rule replay (alerts.json), each change's counterfactual (effects.json) and the loop against its
  static twin (twin.json);
- a store of a live system (`postmortem.live`) behind one interface (`postmortem.source.SeriesSource`,
  asked by series selectors): any PromQL endpoint, Prometheus or a long-term store like VictoriaMetrics
  (`postmortem.prometheus`), or InfluxDB 2 through Flux (`postmortem.influxdb`); the recording rules and
  ALERTS, plus the proposal store's audit log; the effect of each applied change is then the series before
  against after it (`postmortem.effects`), labelled so: a live system has no twin.
`--rules` replays rule files with vmalert over the source's series (`postmortem.replay`,
`postmortem.live_replay`): what they would have fired, for an operator's own rule changes or today's rules
over a window of months ago. A store without ALERTS or recorded series for the window (only the exporters'
pushed raw series) gets the shipped rules replayed: its alerts and its pool and congestion series.

The report (`postmortem.report` and its `report_*` sections): the window; for a demo run, the loop against
the static run (table and both on one chart); the alerts with severity, how long they fired, and links to
the runbook, the Grafana panel and the Prometheus query (`postmortem.links`); pool utilization and queue;
the most congested links; error bursts and GPU faults; one timeline; each applied change with node lists
as Slurm hostlists (moved nodes marked, `postmortem.changes`) and its effect, regressions flagged in red
(`postmortem.regressions`). Every time is on the run's own clock in one format. Charts are inline SVG
(`postmortem.svg`); no script and no external asset, every text is escaped, the same input gives the same
bytes.

Exit status 2 for usage errors and missing or unreadable inputs (rule files included), with the reason on
stderr. Not covered: link error counters (the run directory has none; error bursts come from faults and
alerts).
"""
