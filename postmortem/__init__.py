"""`ibpool postmortem`: given a window (or an alert and a margin), a self-contained HTML report.

Sources, each giving a `model.RunData`: a demo run directory (`rundir`), or a live system's store behind
one interface (`source.SeriesSource`: `prometheus`, `influxdb`) with the proposal store's audit log (`live`).
`--rules` replays rule files with vmalert (`replay`, `live_replay`). The report (`report`, `report_*`) is
one HTML file: inline SVG, no script and no external asset, every text escaped, the same input gives the
same bytes, every time on the run's own clock. Exit status 2 for usage errors and missing or unreadable
inputs, with the reason on stderr. Usage, sources, sections, links and limits: docs/postmortem.md.
"""
