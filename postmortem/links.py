"""Where an alert in a report links to: its runbook, its Grafana panel, its Prometheus query.

Runbooks: with a base URL (`--runbook.url`, e.g. where your copy of the repository serves
`alerts/runbooks/`), `<base>/<Alert>.md`; without one, a relative link from the report's directory to
this repository's `alerts/runbooks/<Alert>.md`, which a browser opens as a file (no link when the file
does not exist). Grafana (`--grafana.url`): the panel of the ibpool dashboards that shows what the alert
watches (`PANELS`), with the alert's node, switch or pool as the dashboard variable and the time range
around it. Prometheus (`--prometheus.link-url`, default the `--prometheus.url` read from): the graph page
with the rule's expression over the same range. Nothing is linked where no URL is configured.
"""

from __future__ import annotations

import functools
import json
import os
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from postmortem.model import Alert

RUNBOOKS_DIR = Path(__file__).resolve().parents[1] / "alerts" / "runbooks"
DASHBOARDS_DIR = Path(__file__).resolve().parents[1] / "dashboards" / "json"
MARGIN_SECONDS = 1800.0

# alert -> ((dashboard uid, panel title) for switch ports (node_guid), for everything else); the panel id
# is looked up in the generated dashboards by title, so a panel added elsewhere never shifts a link.
NODE, FABRIC, POOL, FLEET, DECISIONS = (
    "ibpool-node",
    "ibpool-fabric",
    "ibpool-pool",
    "ibpool-fleet",
    "ibpool-decisions",
)
Panel = tuple[str, str]


def _both(uid: str, title: str) -> tuple[Panel, Panel]:
    return (uid, title), (uid, title)


PANELS: dict[str, tuple[Panel, Panel]] = {
    "IbPortCongested": ((FABRIC, "Congestion by switch and port"), (NODE, "Transmit wait (congestion)")),
    "IbWaitCounterSaturated": (
        (FABRIC, "Congestion by switch and port"),
        (NODE, "Transmit wait (congestion)"),
    ),
    "RocePortCongested": _both(NODE, "Transmit wait (congestion)"),
    "IbLinkErrorsIncreasing": ((FABRIC, "Port errors"), (NODE, "Errors")),
    "IbLinkDowned": ((FABRIC, "Ports not active"), (NODE, "Port state")),
    "IbLinkDegraded": ((FABRIC, "Ports not active"), (NODE, "Port state")),
    "IbPortDown": ((FABRIC, "Ports not active"), (NODE, "Port state")),
    "GpuXidError": _both(NODE, "XID errors"),
    "GpuFellOffBus": _both(NODE, "GPU up"),
    "GpuEccUncorrectable": _both(NODE, "ECC errors"),
    "GpuRowRemapFailure": _both(NODE, "Row remap pending or failed"),
    "GpuRowRemapUncorrectable": _both(NODE, "Remapped rows"),
    "GpuThermalThrottling": _both(NODE, "Throttle reasons active"),
    "GpuPoolImbalanced": (
        (POOL, "Capacity, allocated and pending GPUs"),
        (POOL, "Capacity, allocated and pending GPUs"),
    ),
    "GpuPoolLowUtilization": (
        (POOL, "GPU utilization (pool's nodes)"),
        (POOL, "GPU utilization (pool's nodes)"),
    ),
    "IbpoolExporterDown": _both(FLEET, "Scrape targets down"),
    "IbpoolCollectorFailing": _both(NODE, "Collectors failing"),
    "IbpoolFabricSweepStale": _both(FABRIC, "Last sweep age"),
    "IbpoolFabricTopologyStale": _both(FABRIC, "Topology age"),
    "IbpoolProposalPendingTooLong": _both(DECISIONS, "Oldest pending"),
    "IbpoolChangeApplyFailed": (
        (DECISIONS, "Changes applied and failed"),
        (DECISIONS, "Changes applied and failed"),
    ),
}
# dashboard -> (its variable, the alert label that fills it)
VARIABLES = {
    NODE: ("node", "node"),
    FABRIC: ("switch", "node_desc"),
    POOL: ("pool", "pool"),
    FLEET: ("pool", "pool"),
}


@dataclass(frozen=True)
class LinkSettings:
    """What a report links to; None: no link of that kind."""

    report_dir: Path
    runbook_url: str | None = None
    grafana_url: str | None = None
    prometheus_url: str | None = None
    runbooks_dir: Path = RUNBOOKS_DIR


def runbook(name: str, settings: LinkSettings) -> str | None:
    """The alert's runbook: under the base URL, or a relative file link that resolves (None: no runbook)."""
    if settings.runbook_url:
        return f"{settings.runbook_url.rstrip('/')}/{urllib.parse.quote(name)}.md"
    path = settings.runbooks_dir / f"{name}.md"
    if not path.is_file():
        return None
    relative = os.path.relpath(path, settings.report_dir.resolve())
    return urllib.parse.quote(Path(relative).as_posix())


def _range(alert: Alert, end_of_data: float) -> tuple[float, float]:
    end = alert.end if alert.end is not None else end_of_data
    return alert.start - MARGIN_SECONDS, end + MARGIN_SECONDS


def grafana(alert: Alert, settings: LinkSettings, end_of_data: float) -> str | None:
    """The Grafana panel that shows what the alert watches, around the time it fired."""
    if not settings.grafana_url or alert.name not in PANELS:
        return None
    switch, other = PANELS[alert.name]
    uid, title = switch if alert.labels.get("node_guid") else other
    panel = panel_ids().get((uid, title))
    if panel is None:
        return None
    start, end = _range(alert, end_of_data)
    params = [("viewPanel", str(panel)), ("from", str(int(start * 1000))), ("to", str(int(end * 1000)))]
    variable, label = VARIABLES.get(uid, ("", ""))
    if variable and alert.labels.get(label):
        params.append((f"var-{variable}", alert.labels[label]))
    return f"{settings.grafana_url.rstrip('/')}/d/{uid}?{urllib.parse.urlencode(params)}"


@functools.cache
def panel_ids(directory: Path = DASHBOARDS_DIR) -> dict[tuple[str, str], int]:
    """(dashboard uid, panel title) -> panel id, from the generated dashboards (empty where not shipped)."""
    ids: dict[tuple[str, str], int] = {}
    for path in sorted(directory.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board.get("panels", []):
            ids.setdefault((board["uid"], panel["title"]), panel["id"])
    return ids


def prometheus(alert: Alert, settings: LinkSettings, end_of_data: float) -> str | None:
    """The Prometheus graph of the rule's expression around the time it fired."""
    if not settings.prometheus_url or not alert.expr:
        return None
    start, end = _range(alert, end_of_data)
    params = {
        "g0.expr": alert.expr.strip(),
        "g0.tab": "0",
        "g0.range_input": f"{max(1, round((end - start) / 60))}m",
        "g0.end_input": datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%d %H:%M:%S"),
    }
    return f"{settings.prometheus_url.rstrip('/')}/graph?{urllib.parse.urlencode(params)}"
