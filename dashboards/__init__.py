"""Grafana dashboards as code (grafanalib): one module per dashboard, JSON generated into `json/`.

`python -m dashboards generate` writes the JSON; `python -m dashboards check` fails when it is stale.
"""
