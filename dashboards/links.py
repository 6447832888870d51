"""Drill-down links: a click on a series or a table row opens the next dashboard down for that value.

fleet -> pool (a pool's series or row), pool -> node (a node's series or row), fabric -> node (a switch
port's host end). Each link keeps the time range and the scope variables ($datasource, $cluster, $job);
`series` links read the value from the series' label, `row` links from the table row's field.
"""

from __future__ import annotations

from typing import Any

import attr

KEEP = "${datasource:queryparam}&${cluster:queryparam}&${job:queryparam}&${__url_time_range}"


def url(uid: str, variable: str, value: str) -> str:
    """The link to dashboard `uid` with `variable` set to `value` (a Grafana data-link expression)."""
    return f"/d/{uid}/{uid}?var-{variable}={value}&{KEEP}"


def _with_link(panel: Any, title: str, href: str) -> Any:
    extra = dict(panel.extraJson or {})
    field_config = dict(extra.get("fieldConfig", {}))
    defaults = dict(field_config.get("defaults", {}))
    defaults["links"] = [*defaults.get("links", []), {"title": title, "url": href, "targetBlank": False}]
    field_config["defaults"] = defaults
    extra["fieldConfig"] = field_config
    return attr.evolve(panel, extraJson=extra)


def series_link(panel: Any, uid: str, variable: str, label: str, what: str) -> Any:
    """`panel` whose series link to dashboard `uid` with `variable` = the series' `label`."""
    return _with_link(
        panel, f"{what} ${{__field.labels.{label}}}", url(uid, variable, f"${{__field.labels.{label}}}")
    )


def row_link(panel: Any, uid: str, variable: str, field: str, what: str) -> Any:
    """Table `panel` whose rows link to dashboard `uid` with `variable` = the row's `field`."""
    return _with_link(
        panel, f"{what} ${{__data.fields.{field}}}", url(uid, variable, f"${{__data.fields.{field}}}")
    )
