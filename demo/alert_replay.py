"""The demo's alerts: the shipped rule files replayed by vmalert over the series the loop run recorded.

`ALERTS_DIR` (the repository's alerts/) is loaded as it ships, with the demo cluster's one site setting
(`demo.scenario.RULE_SETTINGS`: its switches and HCAs count 64 KiB PortXmitWait ticks, set through the
rules' own override rules). The series are `series/metrics.jsonl.gz`; the window is the run. The result
goes to `alerts.json`: what was replayed with what, and every firing run with its severity, labels,
start, end, duration and its rule's summary and expression (`postmortem.model.Alert`), or why nothing
was replayed (`status`: "not replayed: vmalert not installed ..."). The demo never evaluates an alert
condition itself.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from postmortem.alerts import from_firings
from postmortem.replay import ReplayError, RuleSet, replay_lines

log = logging.getLogger(__name__)

ALERTS_DIR = Path(__file__).resolve().parents[1] / "alerts"
SERIES_FILE = Path("series") / "metrics.jsonl.gz"
ALERTS_FILE = "alerts.json"
REPLAYED = "replayed"


@dataclass
class AlertReplay:
    """What `alerts.json` holds."""

    status: str
    rules: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    firings: list[dict[str, Any]] = field(default_factory=list)
    engine: str = "vmalert -replay over VictoriaMetrics"

    @property
    def replayed(self) -> bool:
        """True when the rule engine ran."""
        return self.status == REPLAYED


def load_rules(rules: list[Path] | None, settings: dict[str, str]) -> tuple[RuleSet | None, str]:
    """The rule set, or None and why not."""
    paths = rules or [ALERTS_DIR]
    try:
        return RuleSet.load(paths, settings), ""
    except ReplayError as exc:
        return None, str(exc)


def replay_run(out: Path, ruleset: RuleSet | None, why_not: str, start: float, end: float) -> AlertReplay:
    """Replay the run's series with `ruleset` and write alerts.json; never raises for a missing engine."""
    if ruleset is None:
        result = AlertReplay(f"not replayed: {why_not}")
    else:
        result = AlertReplay("", [str(p) for p in ruleset.files], dict(ruleset.settings), start, end)
        try:
            replayed = replay_lines((out / SERIES_FILE).read_bytes(), ruleset, start, end)
        except (ReplayError, OSError) as exc:
            result.status = f"not replayed: {exc}"
        else:
            result.status = REPLAYED
            result.start, result.end = replayed.start, replayed.end
            result.firings = [
                {**asdict(a), "labels": dict(a.labels)} for a in from_firings(replayed.firings, ruleset)
            ]
    if not result.replayed:
        log.warning("alerts %s", result.status)
    (out / ALERTS_FILE).write_text(
        json.dumps(asdict(result), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return result
