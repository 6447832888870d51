"""`ibpool postmortem`: given a window (or an alert and a margin), a self-contained HTML report.

    ibpool postmortem --run DIR [--from T --to T | --alert NAME [--margin 30m]] --out report.html
    ibpool postmortem --prometheus.url URL --db ibpool.db [--from T --to T] [--alert NAME] --out report.html
    (python -m postmortem.cli ... works too)

Sources (`RunData` in `postmortem.model`):
- a demo run directory (`postmortem.rundir`): series/pools.csv, series/links.csv, timeline.json (alerts,
  proposals, approvals, refusals, applies, faults, scripted jobs) and effects.json (measured before/after);
- a Prometheus HTTP API (`postmortem.prometheus`): query_range over the recording rules and ALERTS, plus the
  proposal store's audit log; the effect of each applied change is then the mean of the series in a window
  before and after it (`postmortem.effects`).

The report (`postmortem.report`): header with the window; pool utilization and pending GPUs over time; the
most congested links (top N by peak) with a small chart each; error bursts and GPU faults (fault events and
fault-like alerts, grouped when less than five minutes apart); one timeline with every alert, proposal,
approval, refusal, applied change and fault; and per applied change a before/after table. Charts are inline
SVG drawn here (`postmortem.svg`), with dashed markers at applies, faults and proposals; there is no script
and no external asset, every text is escaped, and the same input gives the same bytes.

Exit status 2 for usage errors and missing or unreadable inputs, with the reason on stderr.
Not covered: link error counters (the run directory has none; error bursts come from faults and alerts).
"""
