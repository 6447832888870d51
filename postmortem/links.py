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

import os
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from postmortem.model import Alert

RUNBOOKS_DIR = Path(__file__).resolve().parents[1] / "alerts" / "runbooks"
MARGIN_SECONDS = 1800.0

# alert -> ((dashboard uid, panel id) for switch ports (node_guid), for everything else)
NODE, FABRIC, POOL, FLEET, DECISIONS = (
    "ibpool-node",
    "ibpool-fabric",
    "ibpool-pool",
    "ibpool-fleet",
    "ibpool-decisions",
)
PANELS: dict[str, tuple[tuple[str, int], tuple[str, int]]] = {
    "IbPortCongested": ((FABRIC, 10), (NODE, 22)),
    "IbWaitCounterSaturated": ((FABRIC, 10), (NODE, 22)),
    "RocePortCongested": ((NODE, 22), (NODE, 22)),
    "IbLinkErrorsIncreasing": ((FABRIC, 14), (NODE, 24)),
    "IbLinkDowned": ((FABRIC, 15), (NODE, 25)),
    "IbLinkDegraded": ((FABRIC, 15), (NODE, 25)),
    "IbPortDown": ((FABRIC, 15), (NODE, 25)),
    "GpuXidError": ((NODE, 13), (NODE, 13)),
    "GpuFellOffBus": ((NODE, 2), (NODE, 2)),
    "GpuEccUncorrectable": ((NODE, 14), (NODE, 14)),
    "GpuThermalThrottling": ((NODE, 11), (NODE, 11)),
    "GpuPoolImbalanced": ((POOL, 9), (POOL, 9)),
    "GpuPoolLowUtilization": ((POOL, 13), (POOL, 13)),
    "IbpoolExporterDown": ((FLEET, 18), (FLEET, 18)),
    "IbpoolCollectorFailing": ((NODE, 29), (NODE, 29)),
    "IbpoolFabricSweepStale": ((FABRIC, 2), (FABRIC, 2)),
    "IbpoolProposalPendingTooLong": ((DECISIONS, 5), (DECISIONS, 5)),
    "IbpoolChangeApplyFailed": ((DECISIONS, 8), (DECISIONS, 8)),
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
    uid, panel = switch if alert.labels.get("node_guid") else other
    start, end = _range(alert, end_of_data)
    params = [("viewPanel", str(panel)), ("from", str(int(start * 1000))), ("to", str(int(end * 1000)))]
    variable, label = VARIABLES.get(uid, ("", ""))
    if variable and alert.labels.get(label):
        params.append((f"var-{variable}", alert.labels[label]))
    return f"{settings.grafana_url.rstrip('/')}/d/{uid}?{urllib.parse.urlencode(params)}"


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
